#pragma once
// A label of fixed lines, each elided to the label's width, so that a row of narrow tiles keeps its
// height instead of wrapping lines over one another (QLabel's word wrap grows a label's height with
// a narrower width, which a grid row whose height is already set cannot give it). The text is
// given once, at construction.
#include <QLabel>
#include <QStringList>

namespace pb::ui {

class ElidedLinesLabel : public QLabel {
    Q_OBJECT
public:
    explicit ElidedLinesLabel(const QString &text, QWidget *parent = nullptr);
    // The text before eliding ('\n' between its lines).
    QString fullText() const { return m_lines.join(QLatin1Char('\n')); }
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void resizeEvent(QResizeEvent *event) override;
    void changeEvent(QEvent *event) override;

private:
    void elide();
    QStringList m_lines;
};

} // namespace pb::ui
