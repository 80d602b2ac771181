#pragma once
// Help > User guide (F1): the staged method and one page per tab, from the guide compiled into the
// binary (resources/help/guide.html), opened at the page of the tab in front.
#include <QDialog>

class QTextBrowser;

namespace pb::ui {

class UserGuideDialog final : public QDialog {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(UserGuideDialog)
public:
    explicit UserGuideDialog(QWidget *parent = nullptr);
    // "method", "configuration", "dashboard", "history", "staged", "compare", "catalog", "cli".
    void showPage(const QString &anchor);
    QTextBrowser *browser() const { return m_browser; }

private:
    QTextBrowser *m_browser = nullptr;
};

} // namespace pb::ui
