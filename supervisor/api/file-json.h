/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON file endpoints (file-json.c): start once the body is read,
 * finish once the built-in is done. */
#ifndef HUTCH_FILE_JSON_H
#define HUTCH_FILE_JSON_H

#include "file-req.h"

/* Validate fr->body and start the built-in (or answer an error). */
enum MHD_Result hutch_file_json_start(struct hutch_file_req *fr);
/* The built-in is done: answer its result. */
enum MHD_Result hutch_file_json_finish(struct hutch_file_req *fr);

#endif
