// The live figures panel: GET /stats every second, a few small hand-drawn charts.
//
// /stats gives counters, gauges and rates over the gateway's last ten seconds. The charts
// keep the last minute of samples in the page. Ack compression is shown two ways:
// over the last ten seconds (computed here from two counters, so that it moves while you
// watch) and since the gateway started (the gateway's own figure).

const HISTORY = 60; // samples kept (a minute at one a second)
const WINDOW = 10; // samples over which the recent ack compression is computed

const COLORS = { a: '#2563eb', b: '#db2777' };

const get = (obj, path) => path.split('.').reduce((o, k) => (o && typeof o === 'object' ? o[k] : undefined), obj);
const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

function fmt(v, digits = 1) {
  if (v === null || v === undefined) return '–';
  if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(1) + 'M';
  if (Math.abs(v) >= 1e4) return (v / 1e3).toFixed(1) + 'k';
  return Number.isInteger(v) ? String(v) : v.toFixed(digits);
}

/** Small element helper: text only, never HTML. */
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

/** A sparkline: each series a line, the first one filled, y from zero to the max seen. */
function drawSparkline(canvas, series) {
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(1, Math.round(canvas.clientWidth * dpr));
  const h = Math.max(1, Math.round(canvas.clientHeight * dpr));
  if (canvas.width !== w || canvas.height !== h) {
    canvas.width = w;
    canvas.height = h;
  }
  const ctx = canvas.getContext('2d');
  ctx.clearRect(0, 0, w, h);
  let max = 0;
  for (const s of series) for (const v of s.values) if (v !== null && v > max) max = v;
  max = max > 0 ? max * 1.15 : 1;
  const pad = 2 * dpr;
  const x = (i) => (HISTORY > 1 ? (i / (HISTORY - 1)) * (w - 2 * pad) + pad : pad);
  const y = (v) => h - pad - (v / max) * (h - 2 * pad);
  // Base line.
  ctx.strokeStyle = '#e5e7eb';
  ctx.lineWidth = dpr;
  ctx.beginPath();
  ctx.moveTo(pad, h - pad);
  ctx.lineTo(w - pad, h - pad);
  ctx.stroke();
  series.forEach((s, si) => {
    const off = HISTORY - s.values.length; // newest at the right edge
    ctx.strokeStyle = s.color;
    ctx.lineWidth = 1.6 * dpr;
    ctx.lineJoin = 'round';
    let path = [];
    const flush = () => {
      if (!path.length) return;
      if (si === 0 && path.length > 1) {
        ctx.fillStyle = s.color + '22';
        ctx.beginPath();
        ctx.moveTo(path[0][0], h - pad);
        for (const [px, py] of path) ctx.lineTo(px, py);
        ctx.lineTo(path[path.length - 1][0], h - pad);
        ctx.closePath();
        ctx.fill();
      }
      ctx.beginPath();
      path.forEach(([px, py], i) => (i ? ctx.lineTo(px, py) : ctx.moveTo(px, py)));
      if (path.length === 1) ctx.arc(path[0][0], path[0][1], dpr, 0, 2 * Math.PI);
      ctx.stroke();
      path = [];
    };
    s.values.forEach((v, i) => {
      if (v === null) return flush(); // a gap: no sample (gateway unreachable, no acks)
      path.push([x(off + i), y(v)]);
    });
    flush();
  });
}

export class StatsPanel {
  /**
   * @param {HTMLElement} root  the pane to fill
   * @param {{url?: string, intervalMs?: number, shouldPoll?: () => boolean}} o
   */
  constructor(root, { url = 'stats', intervalMs = 1000, shouldPoll = () => true } = {}) {
    this.root = root;
    this.url = url;
    this.intervalMs = intervalMs;
    this.shouldPoll = shouldPoll;
    this.samples = []; // raw /stats objects, oldest first (null: missed)
    this.timer = null;
    this.busy = false;
    this.fetches = 0;
    this.charts = [
      {
        id: 'connections',
        title: 'Connections',
        unit: 'open',
        series: [{ label: 'now', color: COLORS.a, value: (s) => num(get(s, 'connections.now')) }],
        note: (s) => `peak ${fmt(num(get(s, 'connections.peak')))} · ${fmt(num(get(s, 'users_online')))} users online`,
      },
      {
        id: 'sends',
        title: 'Messages stored',
        unit: 'per s',
        series: [{ label: 'sends/s', color: COLORS.a, value: (s) => num(get(s, 'messages.sends_per_s')) }],
        note: (s) => `${fmt(num(get(s, 'messages.stored')))} in the store · ${fmt(num(get(s, 'store.messages_per_commit')))} per commit`,
      },
      {
        id: 'deliveries',
        title: 'Live deliveries',
        unit: 'per s',
        series: [{ label: 'deliveries/s', color: COLORS.a, value: (s) => num(get(s, 'messages.deliveries_per_s')) }],
        note: (s) => `${fmt(num(get(s, 'messages.deliveries')))} pushed to sessions in all`,
      },
      {
        id: 'acks',
        title: 'Ack compression',
        unit: 'deliveries per ack frame',
        series: [{ label: 'last 10 s', color: COLORS.a, value: (s, i) => this.recentCompression(i) }],
        note: (s) => `since start ${fmt(num(get(s, 'acks.deliveries_per_ack_frame')))} · ${fmt(num(get(s, 'acks.frames')))} ack frames`,
      },
      {
        id: 'commit',
        title: 'Commit latency',
        unit: 'ms',
        series: [
          { label: 'p50', color: COLORS.a, value: (s) => num(get(s, 'store.commit_p50_ms')) },
          { label: 'p99', color: COLORS.b, value: (s) => num(get(s, 'store.commit_p99_ms')) },
        ],
        note: (s) => `${fmt(num(get(s, 'store.commits')))} group commits (one fsync each)`,
      },
    ];
    this.build();
  }

  build() {
    this.root.replaceChildren();
    this.root.append(
      el('h2', { text: 'Live figures' }),
      (this.status = el('p', { class: 'sub', text: 'from /stats, every second' })),
    );
    const cards = el('div', { class: 'cards' });
    for (const c of this.charts) {
      c.valueEl = el('span', { class: 'v', text: '–' });
      const value = el('div', { class: 'value' }, c.valueEl, el('small', { text: c.unit }));
      const title = el('div', { class: 'title' }, el('span', { text: c.title }));
      if (c.series.length > 1) {
        const legend = el('span', { class: 'legend' });
        for (const s of c.series) {
          const i = el('i');
          i.style.background = s.color;
          legend.append(el('span', {}, i, s.label));
        }
        title.append(legend);
      }
      c.noteEl = el('div', { class: 'note' });
      c.canvas = el('canvas', { 'aria-hidden': 'true' });
      const card = el('div', { class: 'card', 'data-chart': c.id }, title, value, c.canvas, c.noteEl);
      cards.append(card);
    }
    this.root.append(cards);
    this.figures = el('dl', { class: 'figures' });
    this.root.append(this.figures);
    if (typeof ResizeObserver !== 'undefined') {
      this.resize = new ResizeObserver(() => this.render());
      this.resize.observe(this.root);
    }
  }

  start() {
    if (this.timer) return;
    const tick = async () => {
      this.timer = setTimeout(tick, this.intervalMs);
      if (!this.shouldPoll() || this.busy) return;
      this.busy = true;
      try {
        const r = await fetch(this.url, { cache: 'no-store' });
        if (!r.ok) throw new Error('HTTP ' + r.status);
        this.push(await r.json());
        this.status.textContent = 'from /stats, every second';
      } catch {
        this.push(null);
        this.status.textContent = '/stats unreachable: retrying';
      } finally {
        this.busy = false;
      }
    };
    tick();
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = null;
  }

  push(s) {
    this.fetches++;
    this.samples.push(s);
    if (this.samples.length > HISTORY) this.samples.shift();
    this.render();
  }

  /** Live deliveries per ack frame over the last WINDOW samples, or null when no ack
   * frame came in that window. */
  recentCompression(i) {
    const cur = this.samples[i];
    const old = this.samples[Math.max(0, i - WINDOW)];
    if (!cur || !old || cur === old) return null;
    const frames = num(get(cur, 'acks.frames')) - num(get(old, 'acks.frames'));
    const deliveries = num(get(cur, 'messages.deliveries')) - num(get(old, 'messages.deliveries'));
    return frames > 0 && deliveries >= 0 ? deliveries / frames : null;
  }

  render() {
    const last = this.samples.length ? this.samples[this.samples.length - 1] : null;
    for (const c of this.charts) {
      const series = c.series.map((s) => ({
        color: s.color,
        values: this.samples.map((x, i) => (x ? s.value(x, i) : null)),
      }));
      if (last) {
        const vals = c.series.map((s) => fmt(s.value(last, this.samples.length - 1), 2));
        c.valueEl.textContent = vals.join(' / ');
        c.noteEl.textContent = c.note(last);
      }
      if (c.canvas.clientWidth > 0) drawSparkline(c.canvas, series);
    }
    if (last) {
      const rows = [
        ['groups', get(last, 'groups.total')],
        ['messages in pages', get(last, 'pages.messages')],
        ['pages served', get(last, 'pages.served')],
        ['duplicate sends', get(last, 'messages.duplicate_sends')],
        ['notify (slow consumers)', get(last, 'slow_consumers.notifies')],
        ['store on disk', num(get(last, 'store.disk_bytes')) !== null ? fmt(get(last, 'store.disk_bytes') / 1048576, 1) + ' MiB' : null],
        ['uptime', num(get(last, 'uptime_s')) !== null ? fmt(Math.round(get(last, 'uptime_s'))) + ' s' : null],
      ];
      this.figures.replaceChildren(
        ...rows.flatMap(([k, v]) => [el('dt', { text: k }), el('dd', { text: typeof v === 'number' ? fmt(v) : v ?? '–' })]),
      );
    }
  }
}
