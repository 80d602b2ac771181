#pragma once
// Edit or import the card catalog from the GUI. The text is the catalog file itself (JSON), so
// everything a file can say can be edited; nothing is taken until it validates, and a refusal
// names the field, leaving the catalog in use unchanged.
#include "catalog/Catalog.h"

#include <QDialog>

class QLabel;
class QPlainTextEdit;

namespace pb::ui {

class CatalogEditor final : public QDialog {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(CatalogEditor)
public:
    explicit CatalogEditor(const Catalog &current, QWidget *parent = nullptr);
    // The validated catalog once accepted.
    const Catalog &catalog() const { return m_catalog; }
    QPlainTextEdit *editor() const { return m_text; }
    QString errorText() const;
    // Validates the text; on success keeps it as catalog() and returns true.
    bool apply();

private:
    void importFile();
    void saveAs();
    Catalog m_catalog;
    QPlainTextEdit *m_text = nullptr;
    QLabel *m_error = nullptr;
};


} // namespace pb::ui
