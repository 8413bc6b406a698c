/* svg.c — inline SVG plots for the HTML report (see svg.h). */
#include "verify/report/svg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define ZERO_BAND_PX 18.0   /* height (width) of the band where exact zeros sit */
#define ZERO_GAP_PX 6.0     /* gap between the band and the log range */
#define TICK_PX 4.0

/* ------------------------------------------------------------------ numbers */

char *kvv_svg_format(double v, kvv_svg_fmt fmt, char *buf, size_t size)
{
    static const char *const bytes_unit[] = {"B", "kB", "MB", "GB", "TB"};
    static const char *const time_unit[] = {"ns", "µs", "ms", "s"};
    if (!isfinite(v)) {
        snprintf(buf, size, "%s", isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf");
        return buf;
    }
    double a = fabs(v);
    switch (fmt) {
    case KVV_FMT_BYTES: {
        int u = 0;
        while (a >= 1000.0 && u < 4) {
            a /= 1000.0;
            v /= 1000.0;
            u++;
        }
        snprintf(buf, size, "%.3g %s", v, bytes_unit[u]);
        return buf;
    }
    case KVV_FMT_PERCENT:
        snprintf(buf, size, "%.3g%%", v * 100.0);
        return buf;
    case KVV_FMT_SECONDS: {
        int u = 3;
        double x = v;
        while (u > 0 && fabs(x) < 1.0 && x != 0.0) {
            x *= 1000.0;
            u--;
        }
        snprintf(buf, size, "%.3g %s", x, time_unit[u]);
        return buf;
    }
    case KVV_FMT_NUM:
        break;
    }
    if (v == 0.0) {
        snprintf(buf, size, "0");
    } else if (a >= 1e5 || a < 1e-3) {
        /* 1e-06 -> 1e-6, 2.5e+07 -> 2.5e7 */
        char t[32];
        snprintf(t, sizeof t, "%.3g", v);
        char *e = strchr(t, 'e');
        if (e) {
            char *p = e + 1, *q = e + 1;
            if (*p == '+')
                p++;
            if (*p == '-')
                *q++ = *p++;
            while (*p == '0' && p[1])
                p++;
            memmove(q, p, strlen(p) + 1);
        }
        snprintf(buf, size, "%s", t);
    } else {
        snprintf(buf, size, "%.6g", v);
    }
    return buf;
}

/* 1, 2 or 5 times a power of ten, at least raw. */
static double nice_step(double raw)
{
    double p = pow(10.0, floor(log10(raw)));
    double m = raw / p;
    return (m <= 1.0 ? 1.0 : m <= 2.0 ? 2.0 : m <= 5.0 ? 5.0 : 10.0) * p;
}

int kvv_svg_ticks(const kvv_svg_axis *a, double *ticks, int max)
{
    int n = 0;
    if (max < 2 || !(a->hi > a->lo))
        return 0;
    if (a->cats) {
        int every = (a->n_cats + max - 1) / max;
        for (int i = 0; i < a->n_cats && n < max; i += every)
            ticks[n++] = i;
        return n;
    }
    if (a->log && a->lo > 0) {
        double d0 = floor(log10(a->lo) + 1e-9), d1 = ceil(log10(a->hi) - 1e-9);
        if (d1 - d0 >= 1.0) {
            int every = (int)ceil((d1 - d0 + 1.0) / max);
            for (double d = d0; d <= d1 + 1e-9 && n < max; d += every) {
                double v = pow(10.0, d);
                if (v >= a->lo * (1 - 1e-9) && v <= a->hi * (1 + 1e-9))
                    ticks[n++] = v;
            }
            if (n >= 2)
                return n;
            n = 0;
        }
        /* less than a decade: linear ticks inside it */
    }
    double step = nice_step((a->hi - a->lo) / (max - 1));
    if (a->integer && step < 1.0)
        step = 1.0;
    for (double v = ceil(a->lo / step - 1e-9) * step; v <= a->hi + step * 1e-9 && n < max;
         v += step)
        ticks[n++] = fabs(v) < step * 1e-9 ? 0.0 : v;
    return n;
}

/* ------------------------------------------------------------------ scales */

/* Position of v in [0, 1] along the axis' data range, NaN when not drawable;
 * *in_band set when v is a zero of a zero-band axis. */
static double unit_pos(const kvv_svg_axis *a, double v, bool *in_band)
{
    *in_band = false;
    if (!isfinite(v))
        return NAN;
    if (a->log) {
        if (v <= 0.0) {
            *in_band = a->zero_band;
            return a->zero_band ? 0.0 : NAN;
        }
        return (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
    }
    return (v - a->lo) / (a->hi - a->lo);
}

double kvv_svg_px(const kvv_svg *s, double x)
{
    bool band;
    double t = unit_pos(&s->x, x, &band);
    if (band)
        return s->x0 + ZERO_BAND_PX / 2;
    double left = s->x0 + (s->x.zero_band && s->x.log ? ZERO_BAND_PX + ZERO_GAP_PX : 0.0);
    return left + t * (s->x1 - left);
}

double kvv_svg_py(const kvv_svg *s, double y)
{
    bool band;
    double t = unit_pos(&s->y, y, &band);
    if (band)
        return s->y1 - ZERO_BAND_PX / 2;
    double bottom = s->y1 - (s->y.zero_band && s->y.log ? ZERO_BAND_PX + ZERO_GAP_PX : 0.0);
    return bottom - t * (bottom - s->y0);
}

static void fix_axis(kvv_svg_axis *a)
{
    if (a->cats) {
        a->lo = -0.5;
        a->hi = (a->n_cats > 0 ? a->n_cats : 1) - 0.5;
        a->log = false;
    }
    if (a->log && !(a->lo > 0)) {
        a->lo = a->hi > 0 ? a->hi / 10 : 1e-9;
    }
    if (!isfinite(a->lo) || !isfinite(a->hi)) {
        a->lo = 0;
        a->hi = 1;
    }
    if (!(a->hi > a->lo)) {
        if (a->log) {
            a->lo /= 10;
            a->hi *= 10;
        } else {
            a->lo -= 0.5;
            a->hi += 0.5;
        }
    }
    if (!a->log)
        a->zero_band = false;
}

/* ------------------------------------------------------------------ frame */

void kvv_svg_begin(kvv_svg *s, kvv_sbuf *b, int w, int h, const kvv_svg_axis *x,
                   const kvv_svg_axis *y)
{
    memset(s, 0, sizeof *s);
    s->b = b;
    s->w = w;
    s->h = h;
    s->x = *x;
    s->y = *y;
    s->line_width = 1.6;
    s->line_opacity = 1.0;
    fix_axis(&s->x);
    fix_axis(&s->y);
    bool slanted = s->x.cats && s->x.n_cats > 8;
    s->x0 = s->y.cats ? 96 : 74;
    s->x1 = w - 18;
    s->y0 = 12;
    s->y1 = h - (slanted ? 70 : 46);
    kvv_sbuf_fmt(b,
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" role=\"img\" "
                 "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                 "font-family=\"DejaVu Sans, Liberation Sans, Arial, sans-serif\" "
                 "font-size=\"11\">\n",
                 w, h, w, h);
}

void kvv_svg_end(kvv_svg *s)
{
    kvv_sbuf_str(s->b, "</svg>\n");
}

static void text(kvv_sbuf *b, double x, double y, const char *anchor, const char *extra,
                 const char *s)
{
    kvv_sbuf_fmt(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s>", x, y, anchor,
                 extra ? extra : "");
    kvv_sbuf_xml(b, s);
    kvv_sbuf_str(b, "</text>\n");
}

static void x_ticks(kvv_svg *s)
{
    double t[32];
    int n = kvv_svg_ticks(&s->x, t, s->x.cats ? 30 : 9);
    bool slanted = s->x.cats && s->x.n_cats > 8;
    char lab[48];
    for (int i = 0; i < n; i++) {
        double px = kvv_svg_px(s, t[i]);
        if (!isfinite(px))
            continue;
        if (!s->x.cats)
            kvv_sbuf_fmt(s->b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                         "stroke=\"#e4e4e4\"/>\n", px, s->y0, px, s->y1);
        kvv_sbuf_fmt(s->b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                     "stroke=\"#555\"/>\n", px, s->y1, px, s->y1 + TICK_PX);
        const char *l = s->x.cats ? s->x.cats[(int)t[i]] : kvv_svg_format(t[i], s->x.fmt, lab,
                                                                           sizeof lab);
        if (slanted) {
            char rot[64];
            snprintf(rot, sizeof rot, " transform=\"rotate(-35 %.1f %.1f)\"", px,
                     s->y1 + 14);
            text(s->b, px, s->y1 + 14, "end", rot, l);
        } else {
            text(s->b, px, s->y1 + 16, "middle", NULL, l);
        }
    }
    if (s->x.zero_band && s->x.log)
        text(s->b, s->x0 + ZERO_BAND_PX / 2, s->y1 + 16, "middle", NULL, "0");
    if (s->x.label)
        text(s->b, (s->x0 + s->x1) / 2, s->h - 8, "middle", " font-size=\"12\"", s->x.label);
}

static void y_ticks(kvv_svg *s)
{
    double t[32];
    int n = kvv_svg_ticks(&s->y, t, s->y.cats ? 30 : 7);
    char lab[48];
    for (int i = 0; i < n; i++) {
        double py = kvv_svg_py(s, t[i]);
        if (!isfinite(py))
            continue;
        if (!s->y.cats)
            kvv_sbuf_fmt(s->b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                         "stroke=\"#e4e4e4\"/>\n", s->x0, py, s->x1, py);
        kvv_sbuf_fmt(s->b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                     "stroke=\"#555\"/>\n", s->x0 - TICK_PX, py, s->x0, py);
        const char *l = s->y.cats ? s->y.cats[(int)t[i]] : kvv_svg_format(t[i], s->y.fmt, lab,
                                                                           sizeof lab);
        text(s->b, s->x0 - 7, py + 4, "end", NULL, l);
    }
    if (s->y.zero_band && s->y.log) {
        double py = s->y1 - ZERO_BAND_PX / 2;
        kvv_sbuf_fmt(s->b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                     "fill=\"#f3f6fa\"/>\n", s->x0, s->y1 - ZERO_BAND_PX, s->x1 - s->x0,
                     ZERO_BAND_PX);
        text(s->b, s->x0 - 7, py + 4, "end", " font-weight=\"bold\"", "0");
    }
    if (s->y.label) {
        char rot[80];
        double cy = (s->y0 + s->y1) / 2;
        snprintf(rot, sizeof rot, " font-size=\"12\" transform=\"rotate(-90 14 %.1f)\"", cy);
        text(s->b, 14, cy, "middle", rot, s->y.label);
    }
}

void kvv_svg_axes(kvv_svg *s)
{
    kvv_sbuf_fmt(s->b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                 "fill=\"#fff\" stroke=\"none\"/>\n", s->x0, s->y0, s->x1 - s->x0, s->y1 - s->y0);
    y_ticks(s);
    x_ticks(s);
    kvv_sbuf_fmt(s->b, "<path d=\"M%.1f %.1fV%.1fH%.1f\" fill=\"none\" stroke=\"#555\"/>\n",
                 s->x0, s->y0, s->y1, s->x1);
}

/* ------------------------------------------------------------------ marks */

void kvv_svg_line(kvv_svg *s, const double *x, const double *y, int n, const char *color,
                  const char *dash)
{
    bool open = false;
    for (int i = 0; i < n; i++) {
        double px = kvv_svg_px(s, x[i]), py = kvv_svg_py(s, y[i]);
        if (!isfinite(px) || !isfinite(py)) {
            if (open)
                kvv_sbuf_str(s->b, "\"/>\n");
            open = false;
            continue;
        }
        if (!open) {
            kvv_sbuf_fmt(s->b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" "
                         "stroke-opacity=\"%.2f\"%s%s%s points=\"", color, s->line_width,
                         s->line_opacity, dash ? " stroke-dasharray=\"" : "", dash ? dash : "",
                         dash ? "\"" : "");
            open = true;
        }
        kvv_sbuf_fmt(s->b, "%.1f,%.1f ", px, py);
    }
    if (open)
        kvv_sbuf_str(s->b, "\"/>\n");
}

static void shape_at(kvv_sbuf *b, double px, double py, const char *color, kvv_svg_shape shape,
                     const char *cls)
{
    switch (shape) {
    case KVV_SHAPE_SQUARE:
        kvv_sbuf_fmt(b, "<rect%s x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" fill=\"%s\"",
                     cls, px - 4, py - 4, color);
        break;
    case KVV_SHAPE_TRIANGLE:
        kvv_sbuf_fmt(b, "<path%s d=\"M%.1f %.1fl4.2 7.4h-8.4z\" fill=\"%s\"", cls, px,
                     py - 4.6, color);
        break;
    case KVV_SHAPE_DIAMOND:
        kvv_sbuf_fmt(b, "<path%s d=\"M%.1f %.1fl4.5 4.5l-4.5 4.5l-4.5 -4.5z\" fill=\"%s\"", cls,
                     px, py - 4.5, color);
        break;
    case KVV_SHAPE_CIRCLE:
    default:
        kvv_sbuf_fmt(b, "<circle%s cx=\"%.1f\" cy=\"%.1f\" r=\"3.3\" fill=\"%s\"", cls, px, py,
                     color);
        break;
    }
}

static void title_body(kvv_sbuf *b, const char *fmt, va_list ap)
{
    char t[768];
    vsnprintf(t, sizeof t, fmt, ap);
    kvv_sbuf_str(b, "><title>");
    kvv_sbuf_xml(b, t);
    kvv_sbuf_str(b, "</title>");
}

void kvv_svg_point(kvv_svg *s, double x, double y, const char *color, kvv_svg_shape shape,
                   const char *title_fmt, ...)
{
    double px = kvv_svg_px(s, x), py = kvv_svg_py(s, y);
    if (!isfinite(px) || !isfinite(py))
        return;
    if (shape == KVV_SHAPE_NONE)
        shape = KVV_SHAPE_CIRCLE; /* a point is always drawn */
    shape_at(s->b, px, py, color, shape, " class=\"pt\" stroke=\"#fff\" stroke-width=\"0.6\"");
    va_list ap;
    va_start(ap, title_fmt);
    title_body(s->b, title_fmt, ap);
    va_end(ap);
    kvv_sbuf_str(s->b, shape == KVV_SHAPE_CIRCLE ? "</circle>\n"
                       : shape == KVV_SHAPE_SQUARE ? "</rect>\n"
                                                   : "</path>\n");
    s->n_points++;
}

void kvv_svg_whisker(kvv_svg *s, double x, double lo, double hi, const char *color)
{
    double px = kvv_svg_px(s, x), a = kvv_svg_py(s, lo), c = kvv_svg_py(s, hi);
    if (!isfinite(px) || !isfinite(a) || !isfinite(c))
        return;
    kvv_sbuf_fmt(s->b, "<path d=\"M%.1f %.1fV%.1fM%.1f %.1fh6M%.1f %.1fh6\" stroke=\"%s\" "
                 "stroke-width=\"1.1\" fill=\"none\" opacity=\"0.55\"/>\n", px, a, c, px - 3, a,
                 px - 3, c, color);
}

void kvv_svg_rect(kvv_svg *s, double x0, double y0, double x1, double y1, const char *fill,
                  const char *title_fmt, ...)
{
    double a = kvv_svg_px(s, x0), c = kvv_svg_px(s, x1);
    double b = kvv_svg_py(s, y0), d = kvv_svg_py(s, y1);
    if (!isfinite(a) || !isfinite(b) || !isfinite(c) || !isfinite(d))
        return;
    kvv_sbuf_fmt(s->b, "<rect class=\"pt\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                 "height=\"%.1f\" fill=\"%s\"", fmin(a, c), fmin(b, d), fabs(c - a), fabs(d - b),
                 fill);
    va_list ap;
    va_start(ap, title_fmt);
    title_body(s->b, title_fmt, ap);
    va_end(ap);
    kvv_sbuf_str(s->b, "</rect>\n");
    s->n_points++;
}

void kvv_svg_frame(kvv_svg *s, double x0, double y0, double x1, double y1, const char *color)
{
    double a = kvv_svg_px(s, x0), c = kvv_svg_px(s, x1);
    double b = kvv_svg_py(s, y0), d = kvv_svg_py(s, y1);
    if (!isfinite(a) || !isfinite(b) || !isfinite(c) || !isfinite(d))
        return;
    kvv_sbuf_fmt(s->b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                 "fill=\"none\" stroke=\"%s\" stroke-width=\"2.2\"/>\n", fmin(a, c) - 1,
                 fmin(b, d) - 1, fabs(c - a) + 2, fabs(d - b) + 2, color);
}

void kvv_svg_vline(kvv_svg *s, double x, const char *color, const char *label)
{
    double px = kvv_svg_px(s, x);
    if (!isfinite(px))
        return;
    kvv_sbuf_fmt(s->b, "<line class=\"marker\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                 "stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/>\n", px, s->y0,
                 px, s->y1, color);
    if (label) {
        bool right = px < (s->x0 + s->x1) / 2;
        char fill[48];
        snprintf(fill, sizeof fill, " fill=\"%s\" font-weight=\"bold\"", color);
        text(s->b, px + (right ? 4 : -4), s->y0 + 11, right ? "start" : "end", fill, label);
    }
}

void kvv_svg_banner(kvv_svg *s, const char *msg)
{
    double cx = (s->x0 + s->x1) / 2, cy = (s->y0 + s->y1) / 2;
    double w = 8.0 * (double)strlen(msg) + 24;
    kvv_sbuf_fmt(s->b, "<rect class=\"banner\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                 "height=\"26\" rx=\"4\" fill=\"#ffffff\" fill-opacity=\"0.92\" "
                 "stroke=\"#1a7f37\"/>\n", cx - w / 2, cy - 15, w);
    text(s->b, cx, cy + 3, "middle", " font-size=\"13\" font-weight=\"bold\" fill=\"#1a7f37\"",
         msg);
}

void kvv_svg_swatch(kvv_sbuf *b, const char *color, kvv_svg_shape shape, const char *dash)
{
    kvv_sbuf_str(b, "<svg class=\"swatch\" width=\"26\" height=\"12\" viewBox=\"0 0 26 12\">");
    kvv_sbuf_fmt(b, "<line x1=\"1\" y1=\"6\" x2=\"25\" y2=\"6\" stroke=\"%s\" "
                 "stroke-width=\"1.6\"%s%s%s/>", color, dash ? " stroke-dasharray=\"" : "",
                 dash ? dash : "", dash ? "\"" : "");
    if (shape != KVV_SHAPE_NONE) {
        shape_at(b, 13, 6, color, shape, "");
        kvv_sbuf_str(b, "/>");
    }
    kvv_sbuf_str(b, "</svg>");
}

/* ------------------------------------------------------------------ colours */

const char *kvv_svg_color(int i)
{
    /* Tableau 10, then two darker extras: distinct in colour and in print */
    static const char *const pal[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                      "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                                      "#9c755f", "#bab0ac", "#1f3b73", "#6b3d0c"};
    int n = (int)(sizeof pal / sizeof pal[0]);
    return pal[((i % n) + n) % n];
}

void kvv_svg_ramp(double t, char out[8])
{
    /* light yellow -> orange -> dark red, piecewise linear */
    static const double stops[][3] = {
        {255, 237, 160}, {254, 178, 76}, {240, 59, 32}, {128, 0, 38}};
    if (!(t >= 0))
        t = 0;
    if (t > 1)
        t = 1;
    double f = t * 3.0;
    int i = f >= 3.0 ? 2 : (int)f;
    double u = f - i;
    int rgb[3];
    for (int k = 0; k < 3; k++)
        rgb[k] = (int)lround(stops[i][k] + u * (stops[i + 1][k] - stops[i][k]));
    snprintf(out, 8, "#%02x%02x%02x", rgb[0] & 255, rgb[1] & 255, rgb[2] & 255);
}
