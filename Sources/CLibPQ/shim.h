// The only place Kakin includes libpq (PostgreSQL's client library).
#ifndef KAKIN_CLIBPQ_SHIM_H
#define KAKIN_CLIBPQ_SHIM_H
#include <libpq-fe.h>
// Character-literal macros do not import into Swift.
static const int kakin_pg_diag_sqlstate = PG_DIAG_SQLSTATE;
static const int kakin_pg_diag_message_primary = PG_DIAG_MESSAGE_PRIMARY;
#endif
