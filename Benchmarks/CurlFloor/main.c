/* The floor under haul's libcurl transport: the least a program can do through libcurl's multi
 * interface, to tell libcurl's own cost from haul's. Built and run by Benchmarks/run, with the
 * same command line as Benchmarks/URLSessionFloor:
 *
 *   libcurl-floor URL OUTPUT          one URL streamed to a file (workloads B and F)
 *   libcurl-floor --fsync URL OUTPUT  the same, then fsync(2) before closing: the floor of a
 *                                     downloader that makes its file durable (as haul does)
 *   libcurl-floor -i LIST FOLDER N    every URL of LIST into FOLDER, N at a time (workload A);
 *                                     each file is named after its URL's last path segment
 *
 * One thread, one multi handle driven by curl_multi_poll / perform / info_read, N easy handles
 * reused from one transfer to the next (so the multi handle's connection cache keeps the
 * connections alive), each body written with write(2) to the file's descriptor inside the
 * write callback (a slow disk stops the socket being read), CURLOPT_BUFFERSIZE 100 KiB as
 * haul's transport and curl's tool use, Accept-Encoding: identity and nothing decoded. No
 * database, no temp file, no checks beyond the transfer's result and a 2xx status, and no fsync
 * unless asked. Exits 1 when any transfer failed, 64 on a usage error.
 *
 *   cc -O2 main.c -o libcurl-floor -lcurl
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct slot {
    CURL *easy;
    int fd;
    const char *url;
};

static char **urls;            /* the URLs, in order */
static size_t url_count;
static size_t next_url;        /* the next URL to start */
static const char *folder;     /* -i mode: where the files go */
static const char *single_output;  /* single mode: the output file */
static int durable;
static int failures;

/* The body, straight to the file; anything short of the whole chunk makes libcurl abort the
 * transfer with CURLE_WRITE_ERROR. */
static size_t on_body(char *data, size_t size, size_t count, void *context) {
    struct slot *slot = context;
    size_t total = size * count, done = 0;
    while (done < total) {
        ssize_t n = write(slot->fd, data + done, total - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            return 0;
        }
        done += (size_t)n;
    }
    return total;
}

/* The file a URL goes to in -i mode: FOLDER/ its last path segment (query and fragment cut). */
static char *output_path(const char *url) {
    const char *end = url + strcspn(url, "?#");
    const char *start = end;
    while (start > url && start[-1] != '/') start--;
    size_t length = (size_t)(end - start);
    const char *name = length ? start : "index.html";
    if (!length) length = strlen(name);
    char *path = malloc(strlen(folder) + 1 + length + 1);
    if (!path) { perror("malloc"); exit(1); }
    sprintf(path, "%s/%.*s", folder, (int)length, name);
    return path;
}

/* Opens the next URL's file and hands the slot's handle to the multi handle. */
static int start(CURLM *multi, struct slot *slot) {
    if (next_url >= url_count) return 0;
    slot->url = urls[next_url++];
    char *path = single_output ? (char *)single_output : output_path(slot->url);
    slot->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (slot->fd < 0) {
        fprintf(stderr, "error: cannot open %s: %s\n", path, strerror(errno));
        exit(1);
    }
    if (path != single_output) free(path);
    curl_easy_setopt(slot->easy, CURLOPT_URL, slot->url);
    curl_multi_add_handle(multi, slot->easy);
    return 1;
}

/* A transfer ended: note its failure, if any, and close its file (fsync first if asked). */
static void finish(struct slot *slot, CURLcode result) {
    long status = 0;
    curl_easy_getinfo(slot->easy, CURLINFO_RESPONSE_CODE, &status);
    if (result != CURLE_OK) {
        fprintf(stderr, "error: %s: %s\n", slot->url, curl_easy_strerror(result));
        failures++;
    } else if (status < 200 || status > 299) {
        fprintf(stderr, "error: %s: HTTP status %ld\n", slot->url, status);
        failures++;
    }
    if (durable && fsync(slot->fd) != 0) {
        fprintf(stderr, "error: fsync failed: %s\n", strerror(errno));
        failures++;
    }
    close(slot->fd);
    slot->fd = -1;
}

/* Reads LIST: one URL a line, blank lines skipped. */
static void read_list(const char *list) {
    FILE *file = fopen(list, "r");
    if (!file) { fprintf(stderr, "error: cannot open %s: %s\n", list, strerror(errno)); exit(1); }
    size_t capacity = 1024;
    urls = malloc(capacity * sizeof *urls);
    char *line = NULL;
    size_t size = 0;
    ssize_t length;
    while (urls && (length = getline(&line, &size, file)) >= 0) {
        while (length > 0 && (line[length - 1] == '\n' || line[length - 1] == '\r')) line[--length] = 0;
        if (length == 0) continue;
        if (url_count == capacity) urls = realloc(urls, (capacity *= 2) * sizeof *urls);
        if (urls) urls[url_count++] = strdup(line);
    }
    if (!urls) { perror("malloc"); exit(1); }
    free(line);
    fclose(file);
}

int main(int argc, char **argv) {
    long parallel = 1;
    char *single_url[1];
    if (argc == 5 && strcmp(argv[1], "-i") == 0 && (parallel = strtol(argv[4], NULL, 10)) > 0) {
        read_list(argv[2]);
        folder = argv[3];
    } else if (argc == 3 || (argc == 4 && strcmp(argv[1], "--fsync") == 0)) {
        durable = argc == 4;
        single_url[0] = argv[argc - 2];
        urls = single_url;
        url_count = 1;
        single_output = argv[argc - 1];
    } else {
        fprintf(stderr, "usage: libcurl-floor [--fsync] URL OUTPUT | libcurl-floor -i LIST FOLDER N\n");
        return 64;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) { fprintf(stderr, "error: curl_global_init\n"); return 1; }
    CURLM *multi = curl_multi_init();
    struct curl_slist *headers = curl_slist_append(NULL, "Accept-Encoding: identity");
    size_t slot_count = (size_t)parallel < url_count ? (size_t)parallel : url_count;
    struct slot *slots = calloc(slot_count ? slot_count : 1, sizeof *slots);
    if (!multi || !headers || !slots) { fprintf(stderr, "error: cannot set up libcurl\n"); return 1; }

    for (size_t i = 0; i < slot_count; i++) {
        CURL *easy = curl_easy_init();
        if (!easy) { fprintf(stderr, "error: curl_easy_init\n"); return 1; }
        slots[i].easy = easy;
        slots[i].fd = -1;
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 100L * 1024);
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, &slots[i]);
        curl_easy_setopt(easy, CURLOPT_PRIVATE, &slots[i]);
        start(multi, &slots[i]);
    }

    size_t finished = 0;
    while (finished < url_count) {
        int running = 0;
        CURLMcode code = curl_multi_perform(multi, &running);
        if (code != CURLM_OK) { fprintf(stderr, "error: curl_multi_perform: %s\n", curl_multi_strerror(code)); return 1; }
        CURLMsg *message;
        int left;
        while ((message = curl_multi_info_read(multi, &left))) {
            if (message->msg != CURLMSG_DONE) continue;
            struct slot *slot;
            curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **)&slot);
            CURLcode result = message->data.result;  /* read before the handle leaves the multi */
            curl_multi_remove_handle(multi, slot->easy);
            finish(slot, result);
            finished++;
            start(multi, slot);  /* the same handle, the next URL */
        }
        if (finished >= url_count) break;
        code = curl_multi_poll(multi, NULL, 0, 1000, NULL);
        if (code != CURLM_OK) { fprintf(stderr, "error: curl_multi_poll: %s\n", curl_multi_strerror(code)); return 1; }
    }

    for (size_t i = 0; i < slot_count; i++) curl_easy_cleanup(slots[i].easy);
    curl_multi_cleanup(multi);
    curl_slist_free_all(headers);
    curl_global_cleanup();
    return failures ? 1 : 0;
}
