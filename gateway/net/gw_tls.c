/*
 * A self-signed certificate for localhost, made with OpenSSL on first start when no
 * certificate is given, so that the gateway serves wss:// and https:// out of the box.
 * Kept in the data folder and reused on later starts.
 */
#include "gw_net.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define VALID_DAYS 365

static int add_ext(X509 *cert, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext)
        return -1;
    int ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -1;
}

static int write_pem(const char *path, EVP_PKEY *key, X509 *cert)
{
    /* The key is private: created 0600 before anything is written into it. */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, key ? 0600 : 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int ok =
        key ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) : PEM_write_X509(f, cert);
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

static int generate(const char *cert_path, const char *key_path)
{
    int rc = -1;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *cert = X509_new();
    if (!key || !cert)
        goto out;
    X509_set_version(cert, 2);
    unsigned char serial[16];
    FILE *ur = fopen("/dev/urandom", "rb");
    if (!ur || fread(serial, 1, sizeof(serial), ur) != sizeof(serial)) {
        if (ur)
            fclose(ur);
        goto out;
    }
    fclose(ur);
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof(serial), NULL);
    if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert))) {
        BN_free(bn);
        goto out;
    }
    BN_free(bn);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), (long)VALID_DAYS * 86400);
    X509_set_pubkey(cert, key);
    X509_NAME *name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1,
                               0);
    X509_set_issuer_name(cert, name);
    if (add_ext(cert, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1") ||
        add_ext(cert, NID_basic_constraints, "critical,CA:FALSE") ||
        add_ext(cert, NID_ext_key_usage, "serverAuth") || !X509_sign(cert, key, EVP_sha256()))
        goto out;
    if (write_pem(key_path, key, NULL) || write_pem(cert_path, NULL, cert))
        goto out;
    rc = 0;
out:
    X509_free(cert);
    EVP_PKEY_free(key);
    return rc;
}

int gw_tls_self_signed(const char *data, char *cert, size_t cert_n, char *key, size_t key_n)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/tls", data);
    snprintf(cert, cert_n, "%s/cert.pem", dir);
    snprintf(key, key_n, "%s/key.pem", dir);
    if (access(cert, R_OK) == 0 && access(key, R_OK) == 0) {
        gw_info("TLS: using the self-signed certificate %s (made earlier for localhost)", cert);
        return 0;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        gw_err("TLS: cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    if (generate(cert, key) != 0) {
        gw_err("TLS: cannot make a self-signed certificate in %s", dir);
        return -1;
    }
    gw_info("TLS: no --cert/--key given: made a self-signed certificate for localhost, "
            "%s (valid %d days; browsers will warn about it; give --cert and --key for a "
            "real one)",
            cert, VALID_DAYS);
    return 0;
}

/*
 * Sessions here live for hours, so resuming a TLS session saves little, while OpenSSL's
 * server-side session cache keeps a copy of every session (up to 20,480) and TLS 1.3
 * sends two tickets per handshake that cost CPU on both sides. Measured with 10,000 idle
 * wss sessions: see docs/BENCHMARKS.md (W4).
 */
int gw_tls_tune(void *ssl_ctx)
{
    SSL_CTX *ctx = ssl_ctx;
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    return 0;
}
