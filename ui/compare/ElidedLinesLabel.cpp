#include "compare/ElidedLinesLabel.h"

#include <QEvent>
#include <QFontMetrics>

#include <algorithm>

namespace pb::ui {

ElidedLinesLabel::ElidedLinesLabel(const QString &text, QWidget *parent) : QLabel(parent), m_lines(text.split(QLatin1Char('\n')))
{
    setWordWrap(false);
    setTextFormat(Qt::PlainText);
    setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);
    elide();
}

QSize ElidedLinesLabel::sizeHint() const
{
    const QFontMetrics fm(font());
    int width = 0;
    for (const auto &line : m_lines)
        width = std::max(width, fm.horizontalAdvance(line));
    const QMargins m = contentsMargins();
    return {width + m.left() + m.right(), minimumSizeHint().height()};
}

QSize ElidedLinesLabel::minimumSizeHint() const
{
    const QFontMetrics fm(font());
    const QMargins m = contentsMargins();
    const auto lines = static_cast<int>(m_lines.size());
    return {fm.horizontalAdvance(QStringLiteral("W…")) + m.left() + m.right(), lines * fm.height() + (lines - 1) * fm.leading() + m.top() + m.bottom()};
}

void ElidedLinesLabel::resizeEvent(QResizeEvent *event)
{
    QLabel::resizeEvent(event);
    elide();
}

void ElidedLinesLabel::changeEvent(QEvent *event)
{
    QLabel::changeEvent(event);
    if (event->type() == QEvent::FontChange || event->type() == QEvent::StyleChange)
        elide();
}

void ElidedLinesLabel::elide()
{
    const QFontMetrics fm(font());
    const int width = std::max(1, contentsRect().width());
    QStringList shown;
    for (const auto &line : m_lines)
        shown << fm.elidedText(line, Qt::ElideRight, width);
    const QString text = shown.join(QLatin1Char('\n'));
    if (text != QLabel::text())
        QLabel::setText(text);
}

} // namespace pb::ui
