#pragma once
// Recent spdlog lines (the ring buffer of core/log), refreshed by a timer; keeps the view at the
// bottom unless the user scrolled up to read.
#include <QWidget>

class QPlainTextEdit;
class QTimer;

namespace pb::ui {

class LogPanel final : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(LogPanel)
public:
    explicit LogPanel(QWidget *parent = nullptr);
    void refresh();
    QPlainTextEdit *text() const { return m_text; }

private:
    QPlainTextEdit *m_text = nullptr;
    QTimer *m_timer = nullptr;
    std::string m_lastLine;
    size_t m_lastCount = 0;
};

} // namespace pb::ui
