/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Base64 (RFC 4648, standard alphabet, padded), pure. The API uses it for
 * file contents and process output that are not text.
 */
#ifndef HUTCH_BASE64_H
#define HUTCH_BASE64_H

#include <stddef.h>

/* Encode len bytes into a new NUL-terminated string (caller frees); NULL
 * if out of memory. */
char *hutch_base64_encode(const void *in, size_t len);
/* Decode a NUL-terminated string strictly, but for white space (space,
 * tab, CR, LF), which is skipped anywhere. Refused (-EINVAL): a character
 * outside the alphabet, data after '=', more than two '=', a dangling
 * sextet. Missing padding is accepted. On success *ret (caller frees; not
 * NUL-terminated) and *ret_len are set and 0 returned; -ENOMEM. */
int hutch_base64_decode(const char *in, char **ret, size_t *ret_len);

#endif
