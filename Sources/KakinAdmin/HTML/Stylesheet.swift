/// `/admin/assets/admin.css`: the pages' only styling (the Content-Security-Policy allows no inline style and
/// no script at all). Readable on a laptop and on a phone: one column, tables scroll sideways when narrow.
enum Stylesheet {
    static let css = """
        :root { --ink: #1d2330; --muted: #5c6577; --line: #dde1e8; --bg: #f5f6f8; --card: #fff; --accent: #2f5bd3;
                --ok: #1d7a46; --warn: #9a6400; --bad: #b3261e; }
        * { box-sizing: border-box; }
        html { -webkit-text-size-adjust: 100%; }
        body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Hiragino Sans", "Noto Sans JP", sans-serif;
               color: var(--ink); background: var(--bg); }
        a { color: var(--accent); text-decoration: none; }
        a:hover { text-decoration: underline; }
        header.top { background: #1d2330; color: #fff; padding: 10px 16px; display: flex; flex-wrap: wrap; gap: 10px 18px;
                     align-items: center; }
        header.top a { color: #fff; }
        header.top .brand { font-weight: 700; letter-spacing: .02em; }
        header.top nav { display: flex; gap: 14px; flex-wrap: wrap; font-size: 14px; }
        header.top form.search { flex: 1 1 320px; display: flex; gap: 6px; margin: 0; }
        header.top form.search input { flex: 1; min-width: 0; }
        header.top .who { font-size: 13px; color: #c9cfdb; display: flex; gap: 8px; align-items: center; }
        header.top .who form { margin: 0; }
        main { max-width: 1120px; margin: 0 auto; padding: 16px; }
        h1 { font-size: 22px; margin: 6px 0 14px; overflow-wrap: anywhere; }
        h2 { font-size: 17px; margin: 0 0 10px; }
        h3 { font-size: 15px; margin: 14px 0 8px; }
        section.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; margin: 0 0 16px; }
        .grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(260px, 1fr)); gap: 16px; margin: 0 0 16px; }
        .grid > section.card { margin: 0; }
        dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 14px; margin: 0; }
        dl.facts dt { color: var(--muted); }
        dl.facts dd { margin: 0; overflow-wrap: anywhere; }
        .scroll { overflow-x: auto; -webkit-overflow-scrolling: touch; }
        table { border-collapse: collapse; width: 100%; font-size: 14px; }
        th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
        th { color: var(--muted); font-weight: 600; white-space: nowrap; }
        td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
        td.when { white-space: nowrap; color: var(--muted); font-size: 13px; }
        td.small { overflow-wrap: anywhere; min-width: 16em; }
        code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; }
        pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f0f2f6; padding: 8px; border-radius: 6px; margin: 6px 0; }
        details > summary { cursor: pointer; color: var(--accent); font-size: 13px; }
        textarea.jws { width: 100%; height: 90px; font-family: ui-monospace, monospace; font-size: 12px; }
        textarea.json { width: 100%; height: 320px; font-family: ui-monospace, monospace; font-size: 13px; }
        .badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; background: #e8ebf1;
                 color: var(--ink); white-space: nowrap; }
        .badge.good { background: #dff3e6; color: var(--ok); }
        .badge.warn { background: #fdf0d5; color: var(--warn); }
        .badge.bad { background: #fbe1df; color: var(--bad); }
        .muted { color: var(--muted); }
        .small { font-size: 13px; }
        .flash { background: #dff3e6; border: 1px solid #b7e0c4; color: var(--ok); padding: 10px 14px; border-radius: 8px; margin: 0 0 16px; }
        .problem { background: #fbe1df; border: 1px solid #f0bdb8; color: var(--bad); padding: 10px 14px; border-radius: 8px; margin: 0 0 16px; }
        .notice { background: #fdf0d5; border: 1px solid #f1d9a6; color: var(--warn); padding: 10px 14px; border-radius: 8px; margin: 0 0 16px; }
        form.inline { display: flex; flex-wrap: wrap; gap: 8px; align-items: flex-end; margin: 8px 0; }
        form.stack { display: grid; gap: 10px; max-width: 420px; }
        label { display: grid; gap: 3px; font-size: 13px; color: var(--muted); }
        input, select, button { font: inherit; padding: 7px 10px; border: 1px solid #c3c9d4; border-radius: 6px; background: #fff; color: var(--ink); }
        input[type=number] { width: 8em; }
        button { background: var(--accent); border-color: var(--accent); color: #fff; cursor: pointer; font-weight: 600; }
        button.quiet { background: #fff; color: var(--accent); }
        header.top button { padding: 6px 12px; }
        .tabs { display: flex; flex-wrap: wrap; gap: 6px; margin: 0 0 12px; }
        .tabs a { padding: 4px 12px; border-radius: 14px; background: #e8ebf1; color: var(--ink); font-size: 14px; }
        .tabs a.on { background: var(--accent); color: #fff; }
        ul.hits { list-style: none; padding: 0; margin: 0; }
        ul.hits li { border-top: 1px solid var(--line); padding: 10px 0; }
        ul.hits li:first-child { border-top: 0; }
        .kind { font-size: 12px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); }
        .big { font-size: 28px; font-weight: 700; font-variant-numeric: tabular-nums; }
        .grid.metrics { grid-template-columns: repeat(auto-fill, minmax(220px, 1fr)); margin-bottom: 16px; }
        .grid.charts { grid-template-columns: repeat(auto-fill, minmax(min(420px, 100%), 1fr)); margin-bottom: 16px; }
        section.metric .big { font-size: 22px; }
        svg.chart { width: 100%; height: auto; display: block; }
        .pager { display: flex; justify-content: flex-end; gap: 12px; margin-top: 8px; font-size: 14px; }
        @media (max-width: 600px) {
          main { padding: 10px; }
          section.card { padding: 12px; }
          h1 { font-size: 19px; }
          dl.facts { grid-template-columns: 1fr; gap: 0; }
          dl.facts dd { margin-bottom: 6px; }
        }
        """
}
