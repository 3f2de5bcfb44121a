/* What the owner of an exchange (the session glue) calls to drive it, in the order of the
 * contract in exchange.h: admission, the env, body bytes, the end of the body, abandon, and
 * the stream events of HTTP/2 and HTTP/3. Defined in exchange_owner.c, above dispatch (the
 * exchange record and its pool, exchange/exchange.h, are a layer below). */
#ifndef PP_EXCHANGE_OWNER_H
#define PP_EXCHANGE_OWNER_H

#include <stddef.h>
#include <stdint.h>

#include "server/core/core.h"
#include "server/exchange/exchange.h"

/* Admission control: 0 to go on, or 503 when the predicted wait is over the shed budget
 * (counted). Called once per request, before the env is built. */
int pp_exchange_admit(pp_core *c);

/* Starts the REQUEST frame prefix: header, id, t2b, t3, flags, pair count. */
void pp_exchange_env_begin(pp_exchange *x);
/* Closes the env after `pairs` pairs were appended to x->head, and records whether the body
 * streams (content_length > PP_BODY_BUFFER_LIMIT; -1 when unknown). */
void pp_exchange_env_end(pp_exchange *x, uint32_t pairs, int64_t content_length);

/* Body bytes from the client (see the contract in exchange.h). */
void pp_exchange_body_in(pp_exchange *x, const uint8_t *data, size_t len);
/* The request body is complete: the exchange becomes runnable if it is not yet. */
void pp_exchange_body_done(pp_exchange *x);
/* 0 while a streamed upload must not be read further (queued, or the worker socket full). */
int pp_exchange_can_take_body(pp_exchange *x);

/* The client is gone: the exchange leaves the queue (counted as cancelled), or its worker
 * gets CANCEL. The owner must not touch x afterwards. */
void pp_exchange_abandon(pp_exchange *x);

/* For HTTP/2 and HTTP/3 streams: body bytes of the stream whose exchange is x (NULL: none).
 * Returns 1 if the exchange took them (they are counted in x->body_unconsumed until the owner
 * releases their flow-control credit), 0 if they are dropped (no exchange, or it was already
 * answered): the owner gives their credit back at once. */
int pp_exchange_stream_body(pp_exchange *x, const uint8_t *data, size_t len);
/* The stream's request body ended (x may be NULL). */
void pp_exchange_stream_end(pp_exchange *x);
/* The stream closed with error_code (0: its response completed): T6 is recorded for a
 * completed response, then x is abandoned (a queued request leaves the queue, a running one
 * gets CANCEL). The owner has unlinked x from its own lists. */
void pp_exchange_stream_closed(pp_exchange *x, uint64_t error_code);

/* The client took enough of the response that the paused worker may be read again. */
void pp_exchange_client_drained(pp_exchange *x);

#endif
