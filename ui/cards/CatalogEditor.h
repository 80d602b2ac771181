#pragma once
// Edit or import the card catalog from the GUI: the cards as a table (typed columns with units,
// each refused cell marked with its field's message) and the catalog file itself (JSON), which
// says everything and stays the storage; nothing is taken until the whole catalog validates, and
// a refusal names the field, leaving the catalog in use unchanged.
#include "catalog/Catalog.h"

#include <QDialog>

class QLabel;
class QPlainTextEdit;
class QTabWidget;

namespace pb::ui {

class CatalogEditor final : public QDialog {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(CatalogEditor)
public:
    explicit CatalogEditor(const Catalog &current, QWidget *parent = nullptr);
    // The validated catalog once accepted.
    const Catalog &catalog() const { return m_catalog; }
    QPlainTextEdit *editor() const { return m_text; }
    class CatalogTable *table() const { return m_table; }
    QString errorText() const;
    // Validates the text; on success keeps it as catalog() and returns true.
    bool apply();

private:
    void importFile();
    void saveAs();
    void showTable();
    Catalog m_catalog;
    QTabWidget *m_views = nullptr;
    class CatalogTable *m_table = nullptr;
    QPlainTextEdit *m_text = nullptr;
    QLabel *m_error = nullptr;
};


} // namespace pb::ui
