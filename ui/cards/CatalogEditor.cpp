#include "cards/CatalogEditor.h"

#include "catalog/CatalogJson.h"
#include "util/AppPaths.h"
#include "util/Errors.h"
#include "util/FileRules.h"

#include <QDialogButtonBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QJsonDocument>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QVBoxLayout>

namespace pb::ui {

CatalogEditor::CatalogEditor(const Catalog &current, QWidget *parent)
    : QDialog(parent), m_catalog(current), m_text(new QPlainTextEdit(this)), m_error(new QLabel(this))
{
    setWindowTitle(tr("Card catalog"));
    setObjectName(QStringLiteral("catalogEditor"));
    resize(900, 640);
    auto *layout = new QVBoxLayout(this);
    auto *intro = new QLabel(tr("The catalog as a file: cards, datasheet figures, prices by card count and term, options. "
                                "Prices are locally modelled, not quotes. Changes apply only when the whole file validates."),
                             this);
    intro->setWordWrap(true);
    layout->addWidget(intro);
    m_text->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_text->setObjectName(QStringLiteral("catalogText"));
    m_text->setPlainText(QString::fromUtf8(QJsonDocument(catalogToJson(current)).toJson(QJsonDocument::Indented)));
    layout->addWidget(m_text, 1);
    m_error->setObjectName(QStringLiteral("catalogError"));
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("color: #b00020;"));
    m_error->hide();
    layout->addWidget(m_error);
    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Apply"));
    auto *import = buttons->addButton(tr("Import file..."), QDialogButtonBox::ActionRole);
    auto *save = buttons->addButton(tr("Save as..."), QDialogButtonBox::ActionRole);
    connect(import, &QPushButton::clicked, this, &CatalogEditor::importFile);
    connect(save, &QPushButton::clicked, this, &CatalogEditor::saveAs);
    connect(buttons, &QDialogButtonBox::accepted, this, [this] {
        if (apply())
            accept();
    });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);
}

QString CatalogEditor::errorText() const { return m_error->isVisible() || !m_error->text().isEmpty() ? m_error->text() : QString(); }

bool CatalogEditor::apply()
{
    try {
        m_catalog = parseCatalog(m_text->toPlainText().toUtf8(), "the catalog editor");
    } catch (const std::exception &e) {
        m_error->setText(tr("Not applied: %1").arg(QString::fromUtf8(e.what())));
        m_error->show();
        return false;
    }
    m_error->clear();
    m_error->hide();
    return true;
}

void CatalogEditor::importFile()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Import a catalog"), QString(), tr("Catalog (*.json)"));
    if (path.isEmpty())
        return;
    try {
        m_text->setPlainText(QString::fromUtf8(readRegularFile(path, 16 * 1024 * 1024)));
    } catch (const PilotBenchError &e) {
        m_error->setText(QString::fromStdString(e.what()));
        m_error->show();
        return;
    }
    apply();
}

void CatalogEditor::saveAs()
{
    if (!apply())
        return;
    const QString path = QFileDialog::getSaveFileName(this, tr("Save the catalog"), QStringLiteral("catalog.json"), tr("Catalog (*.json)"));
    if (path.isEmpty())
        return;
    try {
        writeFileAtomically(path, QJsonDocument(catalogToJson(m_catalog)).toJson());
    } catch (const PilotBenchError &e) {
        m_error->setText(QString::fromStdString(e.what()));
        m_error->show();
    }
}

} // namespace pb::ui
