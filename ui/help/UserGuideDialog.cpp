#include "help/UserGuideDialog.h"

#include <QDialogButtonBox>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>

namespace pb::ui {

UserGuideDialog::UserGuideDialog(QWidget *parent) : QDialog(parent)
{
    setWindowTitle(tr("PilotBench user guide"));
    resize(760, 640);
    auto *layout = new QVBoxLayout(this);
    m_browser = new QTextBrowser(this);
    m_browser->setObjectName(QStringLiteral("userGuide"));
    m_browser->setOpenExternalLinks(false);
    m_browser->setSource(QUrl(QStringLiteral("qrc:/help/guide.html")));
    layout->addWidget(m_browser, 1);
    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);
}

void UserGuideDialog::showPage(const QString &anchor)
{
    m_browser->scrollToAnchor(anchor);
}

} // namespace pb::ui
