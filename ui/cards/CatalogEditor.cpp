#include "cards/CatalogEditor.h"
#include "cards/CatalogTable.h"

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
#include <QTabWidget>
#include <QVBoxLayout>

namespace pb::ui {

CatalogEditor::CatalogEditor(const Catalog &current, QWidget *parent)
    : QDialog(parent), m_catalog(current), m_text(new QPlainTextEdit(this)), m_error(new QLabel(this))
{
    setWindowTitle(tr("Card catalog"));
    setObjectName(QStringLiteral("catalogEditor"));
    resize(1180, 640); // the cards table's fourteen columns
    auto *layout = new QVBoxLayout(this);
    auto *intro = new QLabel(tr("Cards: the datasheet figures and the one-GPU price with its source and date, a card a row. File: the whole "
                                "catalog, prices by card count and term and options included. Prices are locally modelled, not quotes. "
                                "Changes apply only when the whole catalog validates."),
                             this);
    intro->setWordWrap(true);
    layout->addWidget(intro);
    m_views = new QTabWidget(this);
    m_table = new CatalogTable(m_views);
    m_views->addTab(m_table, tr("Cards"));
    m_text->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_text->setObjectName(QStringLiteral("catalogText"));
    m_text->setPlainText(QString::fromUtf8(QJsonDocument(catalogToJson(current)).toJson(QJsonDocument::Indented)));
    m_views->addTab(m_text, tr("File (JSON)"));
    layout->addWidget(m_views, 1);
    m_table->setJson(catalogToJson(current));
    // The table writes into the file; the file, once edited, fills the table when it is shown.
    connect(m_table, &CatalogTable::jsonEdited, this, [this](const QJsonObject &root) {
        m_text->setPlainText(QString::fromUtf8(QJsonDocument(root).toJson(QJsonDocument::Indented)));
        m_error->setText(m_table->problem().isEmpty() ? QString() : tr("Not valid yet: %1").arg(m_table->problem()));
        m_error->setVisible(!m_table->problem().isEmpty());
    });
    connect(m_views, &QTabWidget::currentChanged, this, [this](int index) {
        if (m_views->widget(index) == m_table)
            showTable();
    });
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

void CatalogEditor::showTable()
{
    const QJsonDocument doc = QJsonDocument::fromJson(m_text->toPlainText().toUtf8());
    if (doc.isObject() && doc.object() != m_table->json())
        m_table->setJson(doc.object());
    else if (!doc.isObject())
        apply(); // says what is wrong with the file; the table keeps what it showed
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
        showTable();
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
