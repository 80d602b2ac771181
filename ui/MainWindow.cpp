#include "MainWindow.h"

#include "engine/Environment.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>

namespace pb::ui {

MainWindow::MainWindow(QWidget *parent) : QMainWindow(parent), m_tabs(new QTabWidget(this))
{
    setWindowTitle(QStringLiteral("PilotBench"));
    setObjectName(QStringLiteral("mainWindow"));
    m_tabs->setObjectName(QStringLiteral("mainTabs"));
    m_tabs->setDocumentMode(true);
    setCentralWidget(m_tabs);
    buildMenus();
    m_deviceLabel = new QLabel(this);
    const bool cuda = cudaAvailable();
    m_deviceLabel->setText(cuda ? tr("Device: CUDA, %1 GPU(s)").arg(cudaDeviceCount()) : tr("Device: CPU only (no CUDA in this build or host)"));
    statusBar()->addPermanentWidget(m_deviceLabel);
    restoreState();
}

MainWindow::~MainWindow() = default;

void MainWindow::buildMenus()
{
    auto *file = menuBar()->addMenu(tr("&File"));
    auto *quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);
    auto *help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&About PilotBench"), this, [this] {
        QMessageBox::about(this, tr("About PilotBench"), QString::fromStdString(buildInfoText()).toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>")));
    });
}

void MainWindow::restoreState()
{
    QSettings settings;
    if (!restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray()))
        resize(1280, 760);
    QMainWindow::restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
}

void MainWindow::closeEvent(QCloseEvent *event)
{
    QSettings settings;
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("window/state"), saveState());
    event->accept();
}

} // namespace pb::ui
