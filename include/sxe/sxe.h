/**
 * @file sxe/sxe.h
 * @brief Everything sxe offers, in one include.
 */
#ifndef SXE_SXE_H
#define SXE_SXE_H

#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/error.h"
#include "sxe/fiber.h"
#include "sxe/hash.h"
#include "sxe/http.h"
#include "sxe/http_client.h"
#include "sxe/http_parser.h"
#include "sxe/json.h"
#include "sxe/log.h"
#include "sxe/loop.h"
#include "sxe/map.h"
#include "sxe/pool.h"
#include "sxe/random.h"
#include "sxe/redis.h"
#include "sxe/resolve.h"
#include "sxe/sqlite.h"
#include "sxe/timer.h"
#include "sxe/tls.h"
#include "sxe/udp.h"
#include "sxe/utf8.h"
#include "sxe/version.h"
#include "sxe/websocket.h"
#include "sxe/work.h"
#include "sxe/workers.h"

#endif
