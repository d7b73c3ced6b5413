#pragma once
// The span timeline of one session over SpanModel: lanes (model, tools, sandbox, waits, marks) on
// one time axis, spans as bars, marks as ticks, a running span growing up to "now".
//
// Zoom with the wheel or + and -, pan by dragging, with the scroll bar, Shift+wheel or the arrow
// keys; 0 shows everything, End follows the newest (the right edge stays on "now"). A click
// selects the span under it (spanActivated); setSelectedSpan() selects one from outside (the
// session view does, for the table's current row) and ensureVisible() brings it into view.
//
// A painted QAbstractScrollArea rather than a QGraphicsView: a 1,000,000-event session has
// hundreds of thousands of spans, and one item each would cost more memory than the spans. Each
// paint visits the spans over the visible range (SpanModel skips blocks outside it) and merges
// those narrower than a few pixels into one bar per run, so a zoomed-out million draws a few
// thousand rectangles. Labels are drawn only on bars wide enough to read them.
//
// Repaints come from the model's changes (coalesced to kCoalesceMs) and, only while a span is open
// and the widget is visible, from a timer that lets the running span grow.
//
// Threads: GUI thread only.

#include <QAbstractScrollArea>

class QTimer;

namespace paddock::console {

class SpanModel;

class SpanTimeline : public QAbstractScrollArea {
    Q_OBJECT

public:
    static constexpr int kLiveRepaintMs = 100;
    // Changes from the model repaint at most this often (a million-event build changes it in
    // thousands of slices, the live tail twenty times a second).
    static constexpr int kCoalesceMs = 50;

    explicit SpanTimeline(QWidget *parent = nullptr);

    void setModel(SpanModel *model);
    SpanModel *model() const { return m_model; }

    int selectedSpan() const { return m_selected; }
    // Selects a span (-1: none) without emitting spanActivated; it is drawn outlined.
    void setSelectedSpan(int id);
    // Pans (and zooms out if it is wider than the view) so the whole span is in view.
    void ensureVisible(int id);

    // The visible range, in Unix ms.
    qint64 visibleStartMs() const;
    qint64 visibleEndMs() const;
    // Following: the right edge stays on the newest time as spans grow (the default).
    bool isFollowing() const { return m_following; }
    void setFollowing(bool following);
    // Showing every span at once (the default, until the user zooms or pans).
    bool isFitted() const { return m_fit; }
    bool isLiveRepainting() const;

    // Where a span is drawn, in viewport coordinates (empty when out of view); the span under a point.
    QRect spanRect(int id) const;
    int spanAt(const QPoint &pos) const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

public slots:
    void zoomIn();
    void zoomOut();
    void fitAll();

signals:
    // The user clicked a span (-1: empty space).
    void spanActivated(int id);
    void followingChanged(bool following);

protected:
    void paintEvent(QPaintEvent *event) override;
    void resizeEvent(QResizeEvent *event) override;
    void showEvent(QShowEvent *event) override;
    void hideEvent(QHideEvent *event) override;
    void mousePressEvent(QMouseEvent *event) override;
    void mouseMoveEvent(QMouseEvent *event) override;
    void mouseReleaseEvent(QMouseEvent *event) override;
    void wheelEvent(QWheelEvent *event) override;
    void keyPressEvent(QKeyEvent *event) override;
    bool viewportEvent(QEvent *event) override;
    void changeEvent(QEvent *event) override;

private:
    // Geometry (span_timeline.cpp).
    int laneHeight() const;
    int axisHeight() const;
    int plotLeft() const;
    int plotWidth() const;
    QRect laneRect(int lane) const;
    double xOf(qint64 ms) const;
    qint64 msAt(double x) const;

    // The view: fitted, following or where the user left it; called before painting and after
    // every change of the data or the size.
    void settleView();
    void zoomBy(double factor, double anchorX);
    void panByMs(double ms);
    void userMoved();   // after a zoom or pan: no longer fitted; following if at the newest
    void updateScrollBar();
    void onScrollBar(int value);
    void onModelChanged();
    void updateLiveTimer();

    // Painting (span_timeline_paint.cpp).
    void paintAxis(class QPainter &painter, const QRect &area) const;
    void paintSpans(class QPainter &painter) const;
    QString toolTipAt(const QPoint &pos) const;

    SpanModel *m_model = nullptr;
    QTimer *m_live = nullptr;
    QTimer *m_coalesce = nullptr;
    int m_selected = -1;
    qint64 m_selectedSeq = 0;   // finds the selection again after the spans are rebuilt
    // The view: its left edge and scale.
    double m_startMs = 0;
    double m_msPerPx = 10;
    bool m_fit = true;
    bool m_following = true;
    // The scroll bar's unit (ms per step), so a long session at a fine zoom fits an int.
    double m_scrollUnitMs = 1;
    bool m_settingScrollBar = false;
    // Dragging to pan.
    QPoint m_pressPos;
    double m_pressStartMs = 0;
    bool m_pressed = false;
    bool m_dragging = false;
};

} // namespace paddock::console
