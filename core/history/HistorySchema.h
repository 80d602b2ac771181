#pragma once
// The history schema and its forward migrations. Version N is what PRAGMA user_version holds once
// migration step N has run; a new file runs every step from 0, so each step is exercised on every
// fresh database and the fixture of each earlier version tests the rest.
#include "util/FileRules.h"

namespace pb::history {

class Connection;

constexpr int kSchemaVersion = 4;
// PRAGMA application_id: tells our files from other SQLite databases ("PBhs").
constexpr int kApplicationId = kHistoryApplicationId;

// Runs steps user_version+1 .. kSchemaVersion inside the caller's transaction.
void migrateSchema(const Connection &connection, int fromVersion);

} // namespace pb::history
