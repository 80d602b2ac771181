#pragma once
#include <QMainWindow>

class QTabWidget;
class QLabel;

namespace pb::ui {

class MainWindow final : public QMainWindow {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(MainWindow)
public:
    explicit MainWindow(QWidget *parent = nullptr);
    ~MainWindow() override;
    QTabWidget *tabs() const { return m_tabs; }

protected:
    void closeEvent(QCloseEvent *event) override;

private:
    void buildMenus();
    void restoreState();
    QTabWidget *m_tabs = nullptr;
    QLabel *m_deviceLabel = nullptr;
};

} // namespace pb::ui
