// libpq, PostgreSQL's client library. Its headers live in /usr/include/postgresql on Debian;
// `pkg-config --cflags libpq` supplies that folder to the build.
#include <libpq-fe.h>
