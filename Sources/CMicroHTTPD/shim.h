// The only place Kakin includes libmicrohttpd.
#ifndef KAKIN_CMICROHTTPD_SHIM_H
#define KAKIN_CMICROHTTPD_SHIM_H
#include <stdint.h>
#include <stddef.h>
#include <stdarg.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>
#endif
