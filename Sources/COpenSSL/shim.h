// The only place Kakin includes OpenSSL. Macros that do not import into Swift get inline wrappers here.
#ifndef KAKIN_COPENSSL_SHIM_H
#define KAKIN_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/err.h>
#include <openssl/bn.h>
#include <openssl/sha.h>
#include <openssl/rand.h>
#include <openssl/objects.h>
#endif
