// libcurl for Swift. curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are variadic, so
// Swift cannot call them; each wrapper below takes one argument type, so every call site says
// what it passes (a wrong integer width through a variadic call is silent on x86-64).
#ifndef HAUL_CCURL_SHIM_H
#define HAUL_CCURL_SHIM_H

#include <curl/curl.h>

static inline CURLcode haul_easy_setopt_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode haul_easy_setopt_offset(CURL *easy, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(easy, option, value);
}

/// libcurl copies the string (curl 7.17+), so it need not outlive the call.
static inline CURLcode haul_easy_setopt_string(CURL *easy, CURLoption option, const char *value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode haul_easy_setopt_pointer(CURL *easy, CURLoption option, void *value) {
    return curl_easy_setopt(easy, option, value);
}

/// The list must outlive the transfer: libcurl does not copy it.
static inline CURLcode haul_easy_setopt_list(CURL *easy, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(easy, option, value);
}

/// For CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION, which share this signature.
static inline CURLcode haul_easy_setopt_write_function(CURL *easy, CURLoption option, curl_write_callback value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLMcode haul_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

static inline CURLcode haul_easy_getinfo_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}

static inline CURLcode haul_easy_getinfo_offset(CURL *easy, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(easy, info, value);
}

static inline CURLcode haul_easy_getinfo_string(CURL *easy, CURLINFO info, char **value) {
    return curl_easy_getinfo(easy, info, value);
}

static inline CURLcode haul_easy_getinfo_pointer(CURL *easy, CURLINFO info, void **value) {
    return curl_easy_getinfo(easy, info, value);
}

/// CURLPAUSE_CONT is a macro of macros, which Swift does not import.
static inline CURLcode haul_easy_unpause(CURL *easy) {
    return curl_easy_pause(easy, CURLPAUSE_CONT);
}

/// CURL_GLOBAL_ALL is a macro of macros, which Swift does not import.
static inline CURLcode haul_curl_global_init(void) {
    return curl_global_init(CURL_GLOBAL_ALL);
}

/// CURLVERSION_NOW is a macro Swift does not import.
static inline curl_version_info_data *haul_curl_version_info(void) {
    return curl_version_info(CURLVERSION_NOW);
}

/// CURLMsg's `data` is a union; the result is read before the handle is removed.
static inline CURLcode haul_multi_message_result(const CURLMsg *message) {
    return message->data.result;
}

#endif
