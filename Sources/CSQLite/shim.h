// The only place Kakin includes SQLite.
#ifndef KAKIN_CSQLITE_SHIM_H
#define KAKIN_CSQLITE_SHIM_H
#include <sqlite3.h>
static inline sqlite3_destructor_type kakin_sqlite_transient(void) { return SQLITE_TRANSIENT; }
/// sqlite3_config is variadic. Memory statistics take a process-wide mutex around every allocation, which
/// every connection's thread then contends for. Only possible before SQLite initializes (the first
/// connection opens); returns SQLITE_MISUSE, changing nothing, afterwards.
static inline int kakin_sqlite_disable_memory_statistics(void) { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }
#endif
