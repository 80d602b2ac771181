#pragma once
// The catalog's cards as a table: a row per card, typed columns with units (memory, bandwidth,
// peaks, interconnect, power, the one-GPU on-demand price and where and when it was read). It
// edits the catalog file's JSON, which stays the storage: each edit is written into the JSON and
// the whole catalog validated, and a refused value marks its cell with the message naming the
// field. Prices by card count and term, options and match patterns stay in the file view.
#include <QJsonObject>
#include <QTableWidget>

namespace pb::ui {

class CatalogTable final : public QTableWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(CatalogTable)
public:
    explicit CatalogTable(QWidget *parent = nullptr);
    // The catalog file's root object: fills the rows (cells of a catalog that does not read show
    // what they hold).
    void setJson(const QJsonObject &root);
    const QJsonObject &json() const { return m_root; }
    // The problem of the last edit ("" none): the field path and what is wrong.
    const QString &problem() const { return m_problem; }

Q_SIGNALS:
    // After every accepted or refused cell edit, with the JSON as it now stands.
    void jsonEdited(const QJsonObject &root);

private:
    void cellEdited(int row, int column);
    void markProblem(const QString &where, const QString &message);
    QJsonObject m_root;
    QString m_problem;
    bool m_filling = false;
};

} // namespace pb::ui
