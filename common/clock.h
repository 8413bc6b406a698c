/*
 * clock.h — the monotonic wall clock every timing in kvverify reads.
 *
 *   double t0 = kvv_now_seconds();
 *   ...
 *   double seconds = kvv_now_seconds() - t0;
 */
#ifndef KVV_CLOCK_H
#define KVV_CLOCK_H

/* Seconds on CLOCK_MONOTONIC (never steps back when the date is set). Only
 * differences mean something. */
double kvv_now_seconds(void);

#endif
