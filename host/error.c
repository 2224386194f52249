/* gpuheap: error codes, messages and the per-thread detail of the last
 * failure. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local char gh_detail[256];

const char* gh_strerror(int err) {
  switch (err) {
    case GH_OK:
      return "success";
#define GH__ERR_TEXT(name, code, text) \
  case GH_ERR_##name:                  \
    return text;
      GH_ERRNO_MAP(GH__ERR_TEXT)
#undef GH__ERR_TEXT
    default:
      return "unknown error";
  }
}

const char* gh_err_name(int err) {
  switch (err) {
    case GH_OK:
      return "GH_OK";
#define GH__ERR_NAME(name, code, text) \
  case GH_ERR_##name:                  \
    return "GH_ERR_" #name;
      GH_ERRNO_MAP(GH__ERR_NAME)
#undef GH__ERR_NAME
    default:
      return "GH_ERR_UNKNOWN";
  }
}

const char* gh_last_error_detail(void) { return gh_detail; }

int _gh_error(int err, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(gh_detail, sizeof gh_detail, fmt, ap);
  va_end(ap);
  return err;
}
