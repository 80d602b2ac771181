#include "report/ReportCanvas.h"

#include <QFontMetricsF>
#include <QPagedPaintDevice>
#include <QPainter>
#include <QTextLayout>

#include <algorithm>

namespace pb::report {
namespace {

// Word wrap that still breaks a token longer than the line (a hash, a path): painted text cannot
// overflow into the next column. QTextLayout draws glyph runs, so the PDF keeps the text.
double layoutWrapped(QTextLayout &layout, double width)
{
    QTextOption option;
    option.setWrapMode(QTextOption::WrapAtWordBoundaryOrAnywhere);
    layout.setTextOption(option);
    layout.beginLayout();
    double y = 0;
    for (QTextLine line = layout.createLine(); line.isValid(); line = layout.createLine()) {
        line.setLineWidth(width);
        line.setPosition(QPointF(0, y));
        y += line.height();
    }
    layout.endLayout();
    return y;
}

} // namespace

double ReportCanvas::drawWrapped(const QRectF &rect, const QString &text, const QFont &font)
{
    QTextLayout layout(text, font, &m_device);
    const double h = layoutWrapped(layout, rect.width());
    layout.draw(&m_painter, rect.topLeft());
    return h;
}

ReportCanvas::ReportCanvas(QPagedPaintDevice &device, QPainter &painter, const QString &footerText, int totalPages)
    : m_device(device), m_painter(painter), m_footerText(footerText), m_totalPages(totalPages)
{
    const QRectF page = QRectF(0, 0, device.width(), device.height());
    m_width = page.width() - 2 * m_margin;
    m_pageHeight = page.height();
    m_bottom = m_pageHeight - m_margin - 14; // room for the footer
    m_y = m_margin;
}

QFont ReportCanvas::font(double pointSize, bool bold)
{
    QFont f(QStringLiteral("DejaVu Sans"));
    f.setPointSizeF(pointSize);
    f.setBold(bold);
    // Without shaping there are no "fi" ligatures, so the PDF's text extracts and searches as typed.
    f.setStyleStrategy(QFont::PreferNoShaping);
    return f;
}

double ReportCanvas::textHeight(const QString &text, const QFont &font, double width) const
{
    QTextLayout layout(text, font, &m_device);
    return layoutWrapped(layout, width);
}

void ReportCanvas::ensure(double height)
{
    if (m_y + height > m_bottom && m_y > m_margin + 1)
        newPage();
}

void ReportCanvas::newPage()
{
    footer();
    m_device.newPage();
    ++m_page;
    m_y = m_margin;
}

void ReportCanvas::footer()
{
    m_painter.save();
    m_painter.setFont(font(7.5));
    m_painter.setPen(QColor(90, 90, 90));
    const QString pageText = m_totalPages > 0 ? QStringLiteral("page %1 of %2").arg(m_page).arg(m_totalPages) : QStringLiteral("page %1").arg(m_page);
    const QRectF line(m_margin, m_pageHeight - m_margin + 2, m_width, 12);
    m_painter.drawLine(QPointF(m_margin, line.top() - 3), QPointF(m_margin + m_width, line.top() - 3));
    const QFontMetricsF fm(m_painter.font(), &m_device);
    m_painter.drawText(line, Qt::AlignLeft | Qt::AlignVCenter, fm.elidedText(m_footerText, Qt::ElideMiddle, m_width - 90));
    m_painter.drawText(line, Qt::AlignRight | Qt::AlignVCenter, pageText);
    m_painter.restore();
}

void ReportCanvas::finish() { footer(); }

QRectF ReportCanvas::reserve(double height)
{
    ensure(height);
    const QRectF r(m_margin, m_y, m_width, height);
    m_y += height;
    return r;
}

void ReportCanvas::title(const QString &text, const QString &subtitle)
{
    const QFont big = font(17, true);
    const double h1 = textHeight(text, big, m_width);
    m_painter.setFont(big);
    m_painter.setPen(Qt::black);
    drawWrapped(QRectF(m_margin, m_y, m_width, h1), text, big);
    m_y += h1 + 2;
    paragraph(subtitle, 9);
    m_painter.setPen(QPen(QColor(40, 80, 140), 1.2));
    m_painter.drawLine(QPointF(m_margin, m_y), QPointF(m_margin + m_width, m_y));
    m_y += 6;
}

void ReportCanvas::section(const QString &title, double keepWithNext)
{
    const QString text = QStringLiteral("%1. %2").arg(++m_section).arg(title);
    const QFont f = font(12, true);
    const double h = textHeight(text, f, m_width);
    ensure(h + 12 + keepWithNext);
    m_y += 8;
    m_painter.setFont(f);
    m_painter.setPen(QColor(30, 60, 110));
    drawWrapped(QRectF(m_margin, m_y, m_width, h), text, f);
    m_y += h + 4;
    m_painter.setPen(Qt::black);
}

void ReportCanvas::paragraph(const QString &text, double pointSize, bool bold)
{
    const QFont f = font(pointSize, bold);
    // A long paragraph may break across pages line by line: lay out by words.
    const double lineHeight = QFontMetricsF(f, &m_device).lineSpacing();
    const double h = textHeight(text, f, m_width);
    m_painter.setFont(f);
    m_painter.setPen(Qt::black);
    if (m_y + h <= m_bottom || h <= 6 * lineHeight) {
        ensure(h);
        drawWrapped(QRectF(m_margin, m_y, m_width, h), text, f);
        m_y += h + 3;
        return;
    }
    const QStringList words = text.split(QLatin1Char(' '));
    QString line;
    const QFontMetricsF fm(f, &m_device);
    auto flush = [&] {
        ensure(lineHeight);
        m_painter.setFont(f);
        m_painter.drawText(QRectF(m_margin, m_y, m_width, lineHeight), Qt::AlignLeft, fm.elidedText(line, Qt::ElideRight, m_width));
        m_y += lineHeight;
        line.clear();
    };
    for (const auto &w : words) {
        const QString candidate = line.isEmpty() ? w : line + QLatin1Char(' ') + w;
        if (fm.horizontalAdvance(candidate) > m_width && !line.isEmpty()) {
            flush();
            line = w;
        } else {
            line = candidate;
        }
    }
    if (!line.isEmpty())
        flush();
    m_y += 3;
}

void ReportCanvas::keyValues(const std::vector<std::pair<QString, QString>> &rows, double keyWidth, double pointSize)
{
    const QFont keyFont = font(pointSize, true);
    const QFont valueFont = font(pointSize);
    const double valueWidth = m_width - keyWidth - 8;
    for (const auto &[key, value] : rows) {
        const double h = std::max(textHeight(key, keyFont, keyWidth), textHeight(value.isEmpty() ? QStringLiteral("-") : value, valueFont, valueWidth));
        ensure(h);
        m_painter.setFont(keyFont);
        m_painter.setPen(QColor(60, 60, 60));
        drawWrapped(QRectF(m_margin, m_y, keyWidth, h), key, keyFont);
        m_painter.setFont(valueFont);
        m_painter.setPen(Qt::black);
        drawWrapped(QRectF(m_margin + keyWidth + 8, m_y, valueWidth, h), value.isEmpty() ? QStringLiteral("-") : value, valueFont);
        m_y += h + 1.5;
    }
    m_y += 3;
}

void ReportCanvas::table(const QStringList &headers, const std::vector<QStringList> &rows, const std::vector<double> &widths, int highlightRow,
                         double pointSize)
{
    const QFont headFont = font(pointSize, true);
    const QFont cellFont = font(pointSize);
    const double pad = 2;
    std::vector<double> colWidths;
    for (double w : widths)
        colWidths.push_back(w * m_width);
    auto rowHeight = [&](const QStringList &cells, const QFont &f) {
        double h = 0;
        for (int c = 0; c < cells.size() && c < static_cast<int>(colWidths.size()); ++c)
            h = std::max(h, textHeight(cells[c], f, colWidths[static_cast<size_t>(c)] - 2 * pad));
        return h + 2 * pad;
    };
    auto drawRow = [&](const QStringList &cells, const QFont &f, double h, const QColor &fill) {
        if (fill.isValid())
            m_painter.fillRect(QRectF(m_margin, m_y, m_width, h), fill);
        m_painter.setFont(f);
        m_painter.setPen(Qt::black);
        double x = m_margin;
        for (int c = 0; c < cells.size() && c < static_cast<int>(colWidths.size()); ++c) {
            const double w = colWidths[static_cast<size_t>(c)];
            drawWrapped(QRectF(x + pad, m_y + pad, w - 2 * pad, h - 2 * pad), cells[c], f);
            x += w;
        }
        m_painter.setPen(QPen(QColor(200, 200, 200), 0.5));
        m_painter.drawLine(QPointF(m_margin, m_y + h), QPointF(m_margin + m_width, m_y + h));
        m_y += h;
    };
    const double headHeight = rowHeight(headers, headFont);
    auto header = [&] { drawRow(headers, headFont, headHeight, QColor(225, 232, 242)); };
    ensure(headHeight + (rows.empty() ? 0 : rowHeight(rows.front(), cellFont)));
    header();
    for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
        const double h = rowHeight(rows[static_cast<size_t>(i)], cellFont);
        if (m_y + h > m_bottom) {
            newPage();
            header(); // the header repeats on every page the table spans
        }
        drawRow(rows[static_cast<size_t>(i)], cellFont, h, i == highlightRow ? QColor(210, 240, 210) : QColor());
    }
    m_y += 6;
}

} // namespace pb::report
