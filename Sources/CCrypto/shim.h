// OpenSSL's libcrypto (already loaded by libcurl): its SHA-256, which uses the CPU's SHA
// instructions where there are some.
#include <openssl/evp.h>
