// The only place Kakin includes libmicrohttpd.
//
// Helpers here exist because Swift cannot call them directly: MHD_start_daemon and
// MHD_get_connection_info are variadic, and option arrays carry function pointers as intptr_t.
#ifndef KAKIN_CMICROHTTPD_SHIM_H
#define KAKIN_CMICROHTTPD_SHIM_H
#include <stdint.h>
#include <stddef.h>
#include <stdarg.h>
#include <string.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

/// Leaves URIs and query arguments exactly as received, so Swift sees the raw path and can
/// reject malformed percent-encoding instead of MHD silently keeping it. ('+' in query
/// arguments is still turned into a space by MHD before this runs.)
static inline size_t kakin_mhd_unescape_none(void *cls, struct MHD_Connection *connection, char *s) {
    (void)cls;
    (void)connection;
    return strlen(s);
}

/// Starts a daemon on an already listening socket (so bind errors are ours to report).
/// Returns NULL when MHD refuses; MHD logs why to stderr (MHD_USE_ERROR_LOG).
static inline struct MHD_Daemon *kakin_mhd_start_daemon(
    unsigned int flags,
    int listen_fd,
    unsigned int thread_count,
    unsigned int connections_max,
    size_t connection_memory_bytes_max,
    unsigned int idle_timeout_seconds,
    MHD_AccessHandlerCallback access_handler,
    MHD_RequestCompletedCallback request_completed,
    MHD_NotifyConnectionCallback notify_connection,
    void *context
) {
    struct MHD_OptionItem options[] = {
        { MHD_OPTION_LISTEN_SOCKET, (intptr_t)listen_fd, NULL },
        { MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)thread_count, NULL },
        { MHD_OPTION_CONNECTION_LIMIT, (intptr_t)connections_max, NULL },
        { MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)connection_memory_bytes_max, NULL },
        { MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)idle_timeout_seconds, NULL },
        { MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)request_completed, context },
        { MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)notify_connection, context },
        { MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)&kakin_mhd_unescape_none, NULL },
        { MHD_OPTION_END, 0, NULL },
    };
    return MHD_start_daemon(flags, 0, NULL, NULL, access_handler, context,
                            MHD_OPTION_ARRAY, options, MHD_OPTION_END);
}

/// The peer address of a connection, or NULL when MHD does not know it.
static inline const struct sockaddr *kakin_mhd_client_address(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info == NULL ? NULL : info->client_addr;
}

/// The connection's socket, or -1 (MHD_get_connection_info is variadic).
static inline int kakin_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

/// What the connection-notify callback stored in `*socket_context`, or NULL.
static inline void *kakin_mhd_socket_context(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info == NULL ? NULL : info->socket_context;
}

/// Bytes of the request line and headers as received, or 0 when MHD does not know yet.
static inline size_t kakin_mhd_request_header_bytes(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    return info == NULL ? 0 : info->header_size;
}

#endif
