#include "log/LogPanel.h"

#include "log/Logging.h"

#include <QFontDatabase>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QTimer>
#include <QVBoxLayout>

namespace pb::ui {

LogPanel::LogPanel(QWidget *parent) : QWidget(parent)
{
    setObjectName(QStringLiteral("logPanel"));
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    m_text = new QPlainTextEdit(this);
    m_text->setReadOnly(true);
    m_text->setMaximumBlockCount(500);
    m_text->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_text->setLineWrapMode(QPlainTextEdit::NoWrap);
    layout->addWidget(m_text);
    m_timer = new QTimer(this);
    m_timer->setInterval(500);
    connect(m_timer, &QTimer::timeout, this, &LogPanel::refresh);
    m_timer->start();
    refresh();
}

void LogPanel::refresh()
{
    const std::vector<std::string> lines = recentLogLines(300);
    // Unchanged since the last look: nothing to redraw (the usual case between events).
    if (lines.size() == m_lastCount && (lines.empty() || lines.back() == m_lastLine))
        return;
    m_lastCount = lines.size();
    m_lastLine = lines.empty() ? std::string() : lines.back();
    QScrollBar *bar = m_text->verticalScrollBar();
    const bool atBottom = bar->value() >= bar->maximum() - 2;
    QString text;
    for (const std::string &line : lines) {
        QString l = QString::fromStdString(line);
        while (l.endsWith(QLatin1Char('\n')))
            l.chop(1);
        text += l + QLatin1Char('\n');
    }
    const int keep = bar->value();
    m_text->setPlainText(text);
    bar->setValue(atBottom ? bar->maximum() : keep);
}

} // namespace pb::ui
