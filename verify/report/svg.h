/*
 * svg.h — the plots of the HTML report (html.c), drawn as inline SVG by
 * kvverify itself: no script, no font, no file fetched, so a report opens
 * from a CI artifact on a machine without a network.
 *
 * One plot is an <svg> with a plot area, two axes and marks in data
 * coordinates. Every data point is one element of class "pt" carrying a
 * <title> (the browser's hover text) with its raw numbers, so a reader (and
 * the browser test, tests/cli/test_html.sh) can count and read them.
 *
 *   kvv_svg_axis x = {.label = "position (token)", .lo = 0, .hi = 31, .integer = true};
 *   kvv_svg_axis y = {.label = "KL (nats)", .lo = 1e-9, .hi = 1, .log = true,
 *                     .zero_band = true};
 *   kvv_svg s;
 *   kvv_svg_begin(&s, &b, 640, 300, &x, &y);
 *   kvv_svg_axes(&s);
 *   kvv_svg_line(&s, xs, ys, n, kvv_svg_color(0), NULL);
 *   for (i...) kvv_svg_point(&s, xs[i], ys[i], kvv_svg_color(0), KVV_SHAPE_CIRCLE, "t=%d KL %g", ...);
 *   kvv_svg_vline(&s, 5, "#000", "first divergence");
 *   kvv_svg_end(&s);                       // s.n_points: the points drawn
 *
 * Scales: linear, or log10 (lo > 0). A log axis with zero_band draws values
 * <= 0 (an exact 0 KL or 0 ULP) in a band below lo, labelled "0", instead of
 * dropping them: an exact zero is the claim under test and must be seen.
 * A categorical axis (cats) puts category i at i, with bands i ± 0.5.
 * Non-finite values are not drawn (a line breaks there).
 */
#ifndef KVV_SVG_H
#define KVV_SVG_H

#include <stdbool.h>
#include <stddef.h>

#include "verify/report/sbuf.h"

/* How an axis writes its tick labels. */
typedef enum {
    KVV_FMT_NUM = 0,   /* compact %g: 0.001, 1e-06 -> 1e-6, 40960 */
    KVV_FMT_BYTES,     /* 512 B, 40 KiB, 1.5 MiB */
    KVV_FMT_PERCENT,   /* a fraction 0..1 as 0%..100% */
    KVV_FMT_SECONDS    /* 12 ns, 3.4 µs, 2 ms, 1.5 s */
} kvv_svg_fmt;

typedef struct {
    const char *label;        /* axis title with its unit, e.g. "position (token)" */
    double lo, hi;            /* data range shown (lo < hi; equal widens to ± 0.5) */
    bool log;                 /* log10 scale (lo > 0 required) */
    bool zero_band;           /* log only: values <= 0 in a band below lo, tick "0" */
    bool integer;             /* ticks at integers only */
    kvv_svg_fmt fmt;
    const char *const *cats;  /* categorical labels at 0..n_cats-1 (borrowed), or NULL */
    int n_cats;
} kvv_svg_axis;

typedef struct {
    kvv_sbuf *b;              /* where the markup goes (borrowed) */
    int w, h;                 /* size of the whole <svg> in px */
    double x0, x1, y0, y1;    /* the plot area in px: x0 left, x1 right, y0 top, y1 bottom */
    kvv_svg_axis x, y;
    int n_points;             /* elements of class "pt" drawn so far */
    double line_width;        /* of kvv_svg_line (default 1.6 px) */
    double line_opacity;      /* of kvv_svg_line (default 1) */
} kvv_svg;

typedef enum {
    KVV_SHAPE_CIRCLE = 0,
    KVV_SHAPE_SQUARE,
    KVV_SHAPE_TRIANGLE,
    KVV_SHAPE_DIAMOND,
    KVV_SHAPE_NONE            /* legend swatches of a line without points */
} kvv_svg_shape;

/* Open <svg> of w x h px with axes x, y (copied; strings borrowed until
 * kvv_svg_end). The plot area leaves room for tick labels and titles. */
void kvv_svg_begin(kvv_svg *s, kvv_sbuf *b, int w, int h, const kvv_svg_axis *x,
                   const kvv_svg_axis *y);
/* Grid, ticks, tick labels and axis titles (and the zero band). */
void kvv_svg_axes(kvv_svg *s);
/* Close </svg>. */
void kvv_svg_end(kvv_svg *s);

/* Data -> px. Values <= 0 on a zero-band log axis map into the band;
 * non-finite values map to NaN. */
double kvv_svg_px(const kvv_svg *s, double x);
double kvv_svg_py(const kvv_svg *s, double y);

/* A polyline through (x[i], y[i]), broken where a value is not finite (or
 * <= 0 on a log axis without a zero band). dash: NULL or a stroke-dasharray. */
void kvv_svg_line(kvv_svg *s, const double *x, const double *y, int n, const char *color,
                  const char *dash);
/* One data point (class "pt") with its hover text (printf-style). */
void kvv_svg_point(kvv_svg *s, double x, double y, const char *color, kvv_svg_shape shape,
                   const char *title_fmt, ...) __attribute__((format(printf, 6, 7)));
/* A vertical whisker from lo to hi at x (the spread of a mean). */
void kvv_svg_whisker(kvv_svg *s, double x, double lo, double hi, const char *color);
/* A filled rectangle in data coordinates (a bar or a heatmap cell), class
 * "pt", with its hover text. */
void kvv_svg_rect(kvv_svg *s, double x0, double y0, double x1, double y1, const char *fill,
                  const char *title_fmt, ...) __attribute__((format(printf, 7, 8)));
/* An outline rectangle in data coordinates (marks a cell), not a point. */
void kvv_svg_frame(kvv_svg *s, double x0, double y0, double x1, double y1, const char *color);
/* A vertical marker line across the plot area with a label. */
void kvv_svg_vline(kvv_svg *s, double x, const char *color, const char *label);
/* A text in the middle of the plot area (e.g. "bit-exact: every cell 0 ULP"),
 * on a white plate so it reads over the marks. */
void kvv_svg_banner(kvv_svg *s, const char *text);

/* A small inline <svg> legend mark: the series' shape and line. */
void kvv_svg_swatch(kvv_sbuf *b, const char *color, kvv_svg_shape shape, const char *dash);

/* Series colour i (a fixed palette readable in print, cycling). */
const char *kvv_svg_color(int i);
/* Heatmap colour of t in [0, 1] (light yellow -> dark red) into out[8]
 * ("#rrggbb"). */
void kvv_svg_ramp(double t, char out[8]);

/* Tick positions of a (finite, lo < hi) axis: at most max. @return count. */
int kvv_svg_ticks(const kvv_svg_axis *a, double *ticks, int max);
/* v as an axis writes it. @return buf. */
char *kvv_svg_format(double v, kvv_svg_fmt fmt, char *buf, size_t size);

#endif
