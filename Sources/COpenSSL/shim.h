// The only place Kakin includes OpenSSL. Macros that do not import into Swift get inline wrappers here.
#ifndef KAKIN_COPENSSL_SHIM_H
#define KAKIN_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>
#include <openssl/pem.h>
#include <openssl/err.h>
#include <openssl/bn.h>
#include <openssl/sha.h>
#include <openssl/rand.h>
#include <openssl/objects.h>
#include <openssl/pkcs7.h>
#include <openssl/core_names.h>

/// EVP_EC_gen is a macro over the variadic EVP_PKEY_Q_keygen.
static inline EVP_PKEY *kakin_EVP_EC_gen_P256(void) {
    return EVP_EC_gen("P-256");
}

/// EVP_RSA_gen is a macro over the variadic EVP_PKEY_Q_keygen.
static inline EVP_PKEY *kakin_EVP_RSA_gen(unsigned int bits) {
    return EVP_RSA_gen(bits);
}

/// EC_GROUP_precompute_mult is deprecated in OpenSSL 3 (an EVP key keeps no table of its own point's multiples), and
/// still the only way to have one: `P256FixedKeyVerifier` builds it for a curve whose generator is a public key.
static inline int kakin_EC_GROUP_precompute_mult(EC_GROUP *group, BN_CTX *ctx) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    int ok = EC_GROUP_precompute_mult(group, ctx);
#pragma GCC diagnostic pop
    return ok;
}

/// EC_POINT_get_Jprojective_coordinates_GFp is deprecated in OpenSSL 3, and still the only way to read a point without
/// the field inversion of its affine coordinates: `P256FixedKeyVerifier` compares x = X/Z² as X against r·Z².
static inline int kakin_EC_POINT_get_Jprojective_coordinates(const EC_GROUP *group, const EC_POINT *point, BIGNUM *x,
                                                             BIGNUM *z, BN_CTX *ctx) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    int ok = EC_POINT_get_Jprojective_coordinates_GFp(group, point, x, NULL, z, ctx);
#pragma GCC diagnostic pop
    return ok;
}

/// BIO_get_mem_data is a macro over BIO_ctrl.
static inline long kakin_BIO_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

/// XN_FLAG_RFC2253 is a composite macro.
static inline unsigned long kakin_XN_FLAG_RFC2253(void) {
    return XN_FLAG_RFC2253;
}

static inline void kakin_OPENSSL_free(void *p) {
    OPENSSL_free(p);
}

/// The typed sk_X509_* helpers are macros.
static inline STACK_OF(X509) *kakin_sk_X509_new_null(void) {
    return sk_X509_new_null();
}

static inline int kakin_sk_X509_push(STACK_OF(X509) *stack, X509 *cert) {
    return sk_X509_push(stack, cert);
}

static inline int kakin_sk_X509_num(const STACK_OF(X509) *stack) {
    return sk_X509_num(stack);
}

static inline X509 *kakin_sk_X509_value(const STACK_OF(X509) *stack, int i) {
    return sk_X509_value(stack, i);
}

/// Frees the stack only; the certificates it points to stay owned by their Swift wrappers.
static inline void kakin_sk_X509_free(STACK_OF(X509) *stack) {
    sk_X509_free(stack);
}

/// Frees the stack and drops one reference of every certificate (for X509_STORE_CTX_get1_chain).
static inline void kakin_sk_X509_pop_free(STACK_OF(X509) *stack) {
    sk_X509_pop_free(stack, X509_free);
}

/// The content of a PKCS#7 SignedData whose content type is data (an App Store receipt's payload): 1 with
/// `*data` (borrowed from `p7`) and `*length` set; 0 when `p7` is anything else or its content is detached.
/// `PKCS7_type_is_*` are macros, and the union behind `p7->d` is easier to walk here.
static inline int kakin_PKCS7_signed_data_content(PKCS7 *p7, const unsigned char **data, int *length) {
    if (p7 == NULL || p7->type == NULL || !PKCS7_type_is_signed(p7) || p7->d.sign == NULL) return 0;
    PKCS7 *inner = p7->d.sign->contents;
    if (inner == NULL || inner->type == NULL || !PKCS7_type_is_data(inner) || inner->d.data == NULL) return 0;
    *data = ASN1_STRING_get0_data(inner->d.data);
    *length = ASN1_STRING_length(inner->d.data);
    return 1;
}

#endif
