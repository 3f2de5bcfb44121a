/* The reason phrase of an HTTP status code (http_status.c), shared by the HTTP/1.1, HTTP/2 and
 * HTTP/3 sessions. */
#ifndef PP_HTTP_STATUS_H
#define PP_HTTP_STATUS_H

/* "Not Found" for 404; "Unknown" for a code the table does not know. Never NULL. */
const char *pp_http_reason_phrase(int status);

#endif
