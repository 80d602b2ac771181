#pragma once
// Pictures of the widgets the UI tests drive, for a person to look at: where PB_SCREENSHOT_DIR is
// set, a test saves what a widget shows there (README: looking at a screen you change).
#include <QString>
#include <QWidget>

inline bool screenshotsWanted() { return !qEnvironmentVariable("PB_SCREENSHOT_DIR").isEmpty(); }

// Saves what `widget` shows as PB_SCREENSHOT_DIR/`file`; true where nothing was asked, or saved.
inline bool saveForLooking(QWidget &widget, const QString &file)
{
    const QString dir = qEnvironmentVariable("PB_SCREENSHOT_DIR");
    return dir.isEmpty() || widget.grab().save(dir + QLatin1Char('/') + file);
}
