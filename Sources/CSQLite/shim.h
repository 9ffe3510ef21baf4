// The only place Kakin includes SQLite.
#ifndef KAKIN_CSQLITE_SHIM_H
#define KAKIN_CSQLITE_SHIM_H
#include <sqlite3.h>
static inline sqlite3_destructor_type kakin_sqlite_transient(void) { return SQLITE_TRANSIENT; }
#endif
