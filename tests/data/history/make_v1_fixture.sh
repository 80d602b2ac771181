#!/bin/sh
# Regenerates v1.sqlite (schema version 1) from v1_fixture.sql with the sqlite3 shell.
# The committed v1.sqlite is the fixture; run this only if the SQL itself is corrected.
set -e
cd "$(dirname "$0")"
rm -f v1.sqlite
sqlite3 v1.sqlite < v1_fixture.sql
sqlite3 v1.sqlite 'PRAGMA user_version; PRAGMA application_id; PRAGMA quick_check;'
