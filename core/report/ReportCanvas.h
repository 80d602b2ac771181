#pragma once
// Flowing page layout for the PDF report: a cursor that moves down the page, headings kept with
// what follows, wrapped paragraphs, key/value blocks and tables that break across pages, and a
// "page N of M" footer. Everything is drawn with QPainter text and lines, so the PDF stays vector
// and its text selectable. Units are points (the writer runs at 72 dpi).
#include <QFont>
#include <QRectF>
#include <QString>
#include <QStringList>

#include <utility>
#include <vector>

class QPainter;
class QPagedPaintDevice;

namespace pb::report {

class ReportCanvas final {
public:
    // `totalPages` 0: unknown yet (first layout pass), the footer then says "page N".
    ReportCanvas(QPagedPaintDevice &device, QPainter &painter, const QString &footerText, int totalPages);
    Q_DISABLE_COPY_MOVE(ReportCanvas)

    double width() const { return m_width; }
    QPainter &painter() { return m_painter; }

    void title(const QString &text, const QString &subtitle);
    // Numbered; starts a new page unless `keepWithNext` points (what must follow it) fit below it.
    void section(const QString &title, double keepWithNext = 80);
    void paragraph(const QString &text, double pointSize = 9, bool bold = false);
    void keyValues(const std::vector<std::pair<QString, QString>> &rows, double keyWidth = 125, double pointSize = 8.5);
    // Column widths are fractions of the width; `highlightRow` is shaded; rows wrap, never overlap.
    void table(const QStringList &headers, const std::vector<QStringList> &rows, const std::vector<double> &widths,
               int highlightRow = -1, double pointSize = 7.5);
    // A block of `height` points on this page (a new page when it does not fit); draw into it.
    QRectF reserve(double height);
    void space(double points) { m_y += points; }
    void finish();                                      // footer of the last page
    int pages() const { return m_page; }

    static QFont font(double pointSize, bool bold = false);
    // Wrapped text at rect's top left (long tokens break anywhere); returns the height used.
    double drawWrapped(const QRectF &rect, const QString &text, const QFont &font);
    double textHeight(const QString &text, const QFont &font, double width) const;

private:
    void ensure(double height);
    void newPage();
    void footer();

    QPagedPaintDevice &m_device;
    QPainter &m_painter;
    QString m_footerText;
    int m_totalPages = 0;
    int m_page = 1;
    int m_section = 0;
    double m_margin = 48;
    double m_width = 0;
    double m_bottom = 0;
    double m_pageHeight = 0;
    double m_y = 0;
};

} // namespace pb::report
