// The report's evidence and decision sections: restoration proof, scaling step, the card
// comparison with the term decision, and the assumptions with the catalog's date and notice.
#include "report/ReportCanvas.h"
#include "report/ReportCostChart.h"
#include "workflow/CatalogSource.h"
#include "report/ReportData.h"
#include "report/ReportSections.h"
#include "util/Units.h"

#include <QJsonObject>
#include <QRegularExpression>

#include <algorithm>

namespace pb::report {
namespace {

QString qs(const std::string &s) { return QString::fromStdString(s); }

QString evidenceLine(const RunRecord &r)
{
    const QString message = r.summary.value(QStringLiteral("message")).toString();
    return message.isEmpty() ? QStringLiteral("-") : message;
}

} // namespace

void paintRestoration(ReportCanvas &c, const ReportData &d)
{
    c.section(reportSectionTitles()[7]);
    if (d.restoreChecks.empty()) {
        c.paragraph(QStringLiteral("Restore check: not run yet for this config (no run of kind restore-check with config hash %1).")
                        .arg(qs(d.run.configHash.substr(0, 12))));
        return;
    }
    c.paragraph(QStringLiteral("Runs of kind restore-check with the same config hash: a checkpoint written mid-run, restored in a fresh process, and the "
                               "continuation compared with the uninterrupted run (losses and a SHA-256 of every parameter). Where a second uninterrupted run "
                               "does not reproduce the first bit for bit (non-deterministic kernels), the continuation passes inside that run-to-run "
                               "variation: its loss and parameter distance from the first run against the second run's, times the margin."));
    std::vector<QStringList> rows;
    for (const auto &r : d.restoreChecks) {
        const QJsonObject &s = r.summary;
        const QString a = s.value(QStringLiteral("uninterrupted_checksum")).toString();
        const QString b = s.value(QStringLiteral("resumed_checksum")).toString();
        const QString checksums = a.isEmpty() || b.isEmpty() ? QStringLiteral("-") : (a == b ? QStringLiteral("equal (%1...)").arg(a.left(12)) : QStringLiteral("DIFFER"));
        // Which kind of pass: bit for bit, or inside the kernels' own run-to-run variation.
        const bool envelope = s.value(QStringLiteral("kind")).toString() == QLatin1String("envelope");
        const QString continuation = s.value(QStringLiteral("bitwise")).toBool() ? QStringLiteral("bit for bit")
                                     : envelope ? QStringLiteral("run-to-run variation (%1x)").arg(s.value(QStringLiteral("envelope_margin")).toDouble())
                                                : QStringLiteral("differs");
        QString lossDiff = QString::number(s.value(QStringLiteral("max_abs_loss_diff")).toDouble(), 'g', 3);
        QString parameters = checksums;
        if (envelope) {
            lossDiff += QStringLiteral(" (runs: %1)").arg(s.value(QStringLiteral("reference_max_abs_loss_diff")).toDouble(), 0, 'g', 3);
            parameters = QStringLiteral("distance %1 (runs: %2)")
                             .arg(s.value(QStringLiteral("parameter_distance")).toDouble(), 0, 'g', 3)
                             .arg(s.value(QStringLiteral("reference_parameter_distance")).toDouble(), 0, 'g', 3);
        }
        rows.push_back({QString::number(r.id), r.startedAt.toUTC().toString(QStringLiteral("yyyy-MM-dd HH:mm")), s.value(QStringLiteral("verdict")).toString(r.verdict),
                        continuation, lossDiff, parameters,
                        formatMs(s.value(QStringLiteral("checkpoint_write_ms")).toDouble()), evidenceLine(r)});
    }
    c.table({QStringLiteral("Run"), QStringLiteral("Started (UTC)"), QStringLiteral("Result"), QStringLiteral("Continuation"), QStringLiteral("Max |loss diff|"),
             QStringLiteral("Parameters"), QStringLiteral("Checkpoint write"), QStringLiteral("Message")},
            rows, {0.06, 0.13, 0.07, 0.12, 0.11, 0.17, 0.1, 0.24});
}

void paintScaling(ReportCanvas &c, const ReportData &d)
{
    c.section(reportSectionTitles()[8]);
    if (d.scaleRuns.empty()) {
        c.paragraph(QStringLiteral("Scaling step: not run yet for this config; multi-GPU figures below use an assumed scaling efficiency."));
        return;
    }
    c.paragraph(QStringLiteral("Runs of kind scale for this config or with this run as their baseline: N data-parallel ranks against one process "
                               "at the same effective batch."));
    std::vector<QStringList> rows;
    for (const auto &r : d.scaleRuns) {
        const QJsonObject &s = r.summary;
        auto number = [&](const char *key, int decimals) {
            return s.contains(QLatin1String(key)) ? QString::number(s.value(QLatin1String(key)).toDouble(), 'f', decimals) : QStringLiteral("-");
        };
        rows.push_back({QString::number(r.id), r.startedAt.toUTC().toString(QStringLiteral("yyyy-MM-dd HH:mm")), r.verdict.isEmpty() ? r.status : r.verdict,
                        QStringLiteral("%1 %2").arg(s.value(QStringLiteral("strategy")).toString(), number("gpus", 0)),
                        number("baseline_tokens_per_s", 0), number("tokens_per_s", 0), number("speedup", 2) + QStringLiteral("x"), number("scaling_efficiency", 3),
                        number("comm_ms_per_step", 2), evidenceLine(r)});
    }
    c.table({QStringLiteral("Run"), QStringLiteral("Started (UTC)"), QStringLiteral("Verdict"), QStringLiteral("Ranks"), QStringLiteral("Baseline tokens/s"),
             QStringLiteral("Scaled tokens/s"), QStringLiteral("Speed-up"), QStringLiteral("Efficiency"), QStringLiteral("Comm. ms/step"), QStringLiteral("Message")},
            rows, {0.05, 0.12, 0.08, 0.08, 0.1, 0.1, 0.09, 0.1, 0.1, 0.18});
    const bool onGpus = std::any_of(d.scaleRuns.begin(), d.scaleRuns.end(), [](const RunRecord &r) { return r.device.startsWith(QLatin1String("cuda")); });
    if (!onGpus)
        c.paragraph(QStringLiteral("These ranks shared CPUs: their efficiency says nothing about NVLink or Infinity Fabric, so the comparison below "
                                   "still assumes its multi-GPU scaling."),
                    8.5);
}

void paintComparison(ReportCanvas &c, const ReportData &d)
{
    c.section(reportSectionTitles()[9]);
    if (!d.comparison) {
        c.paragraph(QStringLiteral("No comparison: ") + qs(d.comparisonError.empty() ? d.configError : d.comparisonError));
        return;
    }
    const Comparison &cmp = *d.comparison;
    c.paragraph(QStringLiteral("Every catalog card at every card count for the planned job of %1 tokens, %2. Step times are labelled measured (ran on that card) "
                               "or modelled (projected; see the assumptions); each count uses the cheapest strategy that fits. Prices: %3 catalog of %4 (%5), cheapest billing.")
                    .arg(formatCount(cmp.plannedTokens))
                    .arg(!cmp.pilotRunId ? QStringLiteral("no pilot of this config: step times from the estimator's FLOPs")
                         : *cmp.pilotRunId == d.run.id ? QStringLiteral("step times from this pilot on %1").arg(qs(cmp.pilotDevice))
                                                       : QStringLiteral("step times from pilot run %1 on %2").arg(*cmp.pilotRunId).arg(qs(cmp.pilotDevice)))
                    .arg(qs(cmp.currency), qs(cmp.catalogDate), qs(cmp.catalogSource)),
                8.5);
    std::vector<QStringList> rows;
    for (const auto &r : cmp.rows) {
        rows.push_back({qs(r.cardId), QStringLiteral("%1 %2").arg(r.gpus).arg(QString::fromLatin1(toString(r.strategy))), r.fits ? QStringLiteral("yes") : QStringLiteral("no"), QString::number(r.maxMicroBatch),
                        formatDuration(r.stepTimeMs / 1000.0), QString::fromLatin1(toString(r.stepTimeBasis)), formatCount(r.tokensPerSecond),
                        formatDuration(r.cost.jobHours * 3600), formatDuration(r.cost.windowHours * 3600), qs(r.cost.plan.description), QString::number(r.cost.totalCost, 'f', 2),
                        QString::number(r.cost.costPerMillionTokens, 'f', 2) + (r.recommended ? QStringLiteral(" *") : QString())});
    }
    c.table({QStringLiteral("Card"), QStringLiteral("GPUs, strategy"), QStringLiteral("Fits"), QStringLiteral("Max micro-batch"), QStringLiteral("Step time"),
             QStringLiteral("Basis"), QStringLiteral("Tokens/s"), QStringLiteral("Job"), QStringLiteral("Window"), QStringLiteral("Billing"),
             QStringLiteral("Total (%1)").arg(qs(cmp.currency)), QStringLiteral("Per M tokens")},
            rows, {0.13, 0.075, 0.04, 0.07, 0.07, 0.08, 0.08, 0.07, 0.07, 0.12, 0.075, 0.085}, cmp.recommendedIndex, 6.5);
    c.paragraph(QStringLiteral("* recommended (shaded). ") + qs(cmp.recommendation));
    c.paragraph(qs(numericFormatText(cmp)), 8.5);
    c.space(6);
    drawCostHoursChart(c.painter(), c.reserve(240), cmp);
    c.space(6);

    c.paragraph(QStringLiteral("Term decision"), 10, true);
    if (d.decision) {
        const QJsonObject &s = d.decision->summary;
        const int gpus = s.value(QStringLiteral("gpus")).toInt();
        c.paragraph(QStringLiteral("Recorded decision (run %1, %2): %3 x%4%5, %6; %7 %8 in total, %9 %8 per million useful tokens, over a %10 rental window "
                                   "(catalog %11 of %12). Evidence: pilot %13.")
                        .arg(d.decision->id)
                        .arg(d.decision->startedAt.toUTC().toString(QStringLiteral("yyyy-MM-dd HH:mm")), s.value(QStringLiteral("card_name")).toString())
                        .arg(gpus)
                        .arg(gpus > 1 ? QStringLiteral(" with ") + s.value(QStringLiteral("strategy")).toString() : QString(), s.value(QStringLiteral("billing")).toString())
                        .arg(s.value(QStringLiteral("total_cost")).toDouble(), 0, 'f', 2)
                        .arg(s.value(QStringLiteral("currency")).toString())
                        .arg(s.value(QStringLiteral("cost_per_million_tokens")).toDouble(), 0, 'f', 2)
                        .arg(formatDuration(s.value(QStringLiteral("window_hours")).toDouble() * 3600), s.value(QStringLiteral("catalog_source")).toString(),
                             s.value(QStringLiteral("catalog_date")).toString(),
                             s.value(QStringLiteral("evidence")).toObject().value(QStringLiteral("pilot_run_id")).isDouble()
                                 ? QString::number(s.value(QStringLiteral("evidence")).toObject().value(QStringLiteral("pilot_run_id")).toInt())
                                 : QStringLiteral("none")),
                    8.5);
        // A decision the comparison above no longer supports says so, next to it.
        if (!d.decisionStale.empty())
            c.paragraph(QStringLiteral("This decision is out of date: %1. Compare again and record the decision to replace it.").arg(qs(d.decisionStale)), 8.5, true);
        if (cmp.recommendedIndex >= 0) {
            const ComparisonRow &now = cmp.rows[static_cast<size_t>(cmp.recommendedIndex)];
            if (qs(now.cardId) != s.value(QStringLiteral("card")).toString() || now.gpus != gpus)
                c.paragraph(QStringLiteral("It differs from the comparison above, which recommends %1 x%2 (every card count, cheapest billing; a decision recorded with other "
                                           "options can differ for that reason alone).")
                                .arg(qs(now.cardName))
                                .arg(now.gpus),
                            8.5, d.decisionStale.empty());
        }
    } else {
        c.paragraph(QStringLiteral("No decision recorded for this config yet (compare --record, or Record decision in the Compare tab)."), 8.5);
    }
    if (cmp.recommendedIndex < 0 || d.recommendedPlans.empty()) {
        c.paragraph(QStringLiteral("No term decision: nothing fits and meets the deadline."));
        return;
    }
    const auto &best = cmp.rows[static_cast<size_t>(cmp.recommendedIndex)];
    c.paragraph(QStringLiteral("Billing candidates for %1 x%2 over a %3 rental window, cheapest first; the first is chosen.")
                    .arg(qs(best.cardName)).arg(best.gpus).arg(formatDuration(best.cost.windowHours * 3600)),
                8.5);
    std::vector<QStringList> rows2;
    for (const auto &p : d.recommendedPlans)
        rows2.push_back({qs(p.description), qs(p.termId), QString::number(p.billedHours, 'f', 0), formatMoney(p.gpuCost, cmp.currency)});
    c.table({QStringLiteral("Billing"), QStringLiteral("Term"), QStringLiteral("Billed hours"), QStringLiteral("GPU cost")}, rows2, {0.4, 0.15, 0.25, 0.2}, 0);
}

void paintAssumptions(ReportCanvas &c, const ReportData &d)
{
    c.section(reportSectionTitles()[10]);
    c.keyValues({
        {QStringLiteral("Catalog"), QStringLiteral("modelled on %1 (%2)").arg(qs(d.catalog.modelledOn), qs(catalogSourceLabel(d.catalog)))},
        {QStringLiteral("Notice"), qs(d.catalog.notice)},
        {QStringLiteral("Price basis"), qs(d.catalog.priceBasis)},
    });
    // Every price with where it comes from and when that was read: prices move by the month.
    c.paragraph(QStringLiteral("Prices (on demand, one GPU) and their sources"), 9, true);
    for (const CardSpec &card : d.catalog.cards) {
        const QString price = formatMoney(card.onDemand.perGpuHourByGpus.count(1) ? card.onDemand.perGpuHourByGpus.at(1) : 0.0, d.catalog.currency);
        c.paragraph(card.priceSource ? QStringLiteral("- %1: %2 per GPU-hour, price as of %3. %4%5")
                                           .arg(qs(card.name), price, qs(card.priceSource->asOf), qs(card.priceSource->text),
                                                card.priceSource->url.empty() ? QString() : QStringLiteral(" (%1)").arg(qs(card.priceSource->url)))
                                     : QStringLiteral("- %1: %2 per GPU-hour; the catalog does not say where this price comes from.").arg(qs(card.name), price),
                    7.5);
    }
    std::vector<std::string> items;
    auto add = [&](const std::string &a) {
        if (std::find(items.begin(), items.end(), a) == items.end())
            items.push_back(a);
    };
    if (d.comparison) {
        for (const auto &a : d.comparison->assumptions)
            add(a);
        // Single-GPU rows carry each card's projection notes; larger counts add only their scaling.
        // The same words for several cards or counts are one item naming them all (ten cards at
        // four counts otherwise repeat the same sentence dozens of times).
        struct Group {
            QString text;                     // with %COUNTS% where a card count was
            std::vector<std::string> cards;
            std::vector<int> counts;
        };
        std::vector<Group> groups;
        static const QRegularExpression atCount(QStringLiteral(" at (\\d+) GPUs"));
        std::vector<std::string> allCards;
        for (const auto &r : d.comparison->rows) {
            if (std::find(allCards.begin(), allCards.end(), r.cardId) == allCards.end())
                allCards.push_back(r.cardId);
            for (const auto &a : r.assumptions) {
                if (r.gpus != 1 && a.find("scaling efficiency") == std::string::npos)
                    continue;
                QString text = qs(a);
                text.replace(atCount, QStringLiteral(" at %COUNTS% GPUs"));
                auto g = std::find_if(groups.begin(), groups.end(), [&](const Group &x) { return x.text == text; });
                if (g == groups.end())
                    g = groups.insert(groups.end(), Group {text, {}, {}});
                if (std::find(g->cards.begin(), g->cards.end(), r.cardId) == g->cards.end())
                    g->cards.push_back(r.cardId);
                if (std::find(g->counts.begin(), g->counts.end(), r.gpus) == g->counts.end())
                    g->counts.push_back(r.gpus);
            }
        }
        for (const Group &g : groups) {
            QStringList counts, xCounts;
            for (int n : g.counts) {
                counts << QString::number(n);
                xCounts << QStringLiteral("x%1").arg(n);
            }
            QStringList cards;
            for (const auto &c : g.cards)
                cards << qs(c);
            const QString who = g.cards.size() == allCards.size() && allCards.size() > 1 ? QStringLiteral("every card") : cards.join(QStringLiteral(", "));
            add((who + QLatin1Char(' ') + xCounts.join(QStringLiteral(", ")) + QStringLiteral(": ") + QString(g.text).replace(QStringLiteral("%COUNTS%"), counts.join(QStringLiteral(", ")))).toStdString());
        }
    }
    if (d.estimate) {
        for (const auto &a : d.estimate->assumptions)
            add("memory estimate: " + a);
    }
    int listed = 0;
    for (const auto &a : items) {
        c.paragraph(QStringLiteral("- ") + qs(a), 7.5);
        ++listed;
    }
    if (listed == 0)
        c.paragraph(QStringLiteral("No further assumptions."), 8);
}

} // namespace pb::report
