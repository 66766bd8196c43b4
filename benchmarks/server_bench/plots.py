"""server_*.png: the run's figures as plots."""

from __future__ import annotations

from pathlib import Path

from server_bench.plan import AIMS, LOAD_SHARE, REFERENCE
from server_bench.sections import locust_runs


def plot(results: dict, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    runs = results["runs"]
    series = sorted({(r["scenario"], r["connection"]) for r in runs})
    paths = []

    fig, ax = plt.subplots(figsize=(11, 5))
    scenarios = sorted({scenario for scenario, _ in series})
    colours = {scenario: f"C{i}" for i, scenario in enumerate(scenarios)}
    for scenario, connection in series:
        points = sorted(
            (r["connections"], r["requests_per_s"])
            for r in runs
            if r["scenario"] == scenario and r["connection"] == connection
        )
        style = "--" if connection == "close" else "-"
        ax.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            style,
            marker="o",
            color=colours[scenario],
            label=f"{scenario}, {connection}",
        )
    ax.axhline(
        REFERENCE["requests_per_s"],
        color="grey",
        linestyle=":",
        label="open-source tracker /request (reference)",
    )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")  # hello-world runs ~10x faster: a linear axis flattens the rest
    ax.set_xticks(list(results["setup"]["levels"]), [str(x) for x in results["setup"]["levels"]])
    ax.set_xlabel("concurrent connections (wrk)")
    ax.set_ylabel("requests per second")
    ax.set_title(
        f"Throughput vs concurrency ({results['setup']['tracker_workers']} bjoern workers, {results['date_utc']})"
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    paths.append(out_dir / "server_throughput.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    levels = results["setup"]["levels"]
    columns = min(2, len(levels) + 1)
    rows = -(-(len(levels) + 1) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(7 * columns, 4.5 * rows), sharey=True, squeeze=False)
    flat_axes = [ax for row in axes for ax in row]
    percentiles = ("p50", "p90", "p99")
    width = 0.8 / len(series)
    panels = [(f"{c} connections", [r for r in runs if r["connections"] == c]) for c in levels]
    panels.append(
        (
            f"~{int(LOAD_SHARE * 100)}% of peak",
            [results["below_saturation"], results["below_saturation_paced"]],
        )
    )
    for ax, (title, chosen) in zip(flat_axes, panels):
        names = [(r["scenario"], r["connection"]) for r in chosen]
        for i, r in enumerate(chosen):
            xs = [p + (i - len(chosen) / 2 + 0.5) * width for p in range(len(percentiles))]
            ax.bar(
                xs,
                [r["latency_ms"][p] for p in percentiles],
                width * 0.95,
                label=f"{names[i][0]}, {names[i][1]}",
            )
        ax.axhline(REFERENCE["p99_ms"], color="grey", linestyle=":", label="reference p99")
        if title.startswith("~"):
            ax.axhline(
                AIMS["p99_ms_at_70pct"],
                color="red",
                linestyle="--",
                linewidth=0.8,
                label=f"aim: p99 under {AIMS['p99_ms_at_70pct']:g} ms",
            )
        ax.set_xticks(range(len(percentiles)), percentiles)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.grid(alpha=0.3, axis="y")
    for row in axes:
        row[0].set_ylabel("latency (ms, log scale)")
    flat_axes[0].legend(fontsize=7)
    flat_axes[len(panels) - 1].legend(fontsize=7)
    for ax in flat_axes[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle("Latency percentiles seen by wrk")
    fig.tight_layout()
    paths.append(out_dir / "server_latency.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    runs = locust_runs(results)
    if runs:
        fig, (irsr_ax, rtt_ax, rate_ax) = plt.subplots(3, 1, figsize=(11, 9), sharex=True)
        for i, r in enumerate(runs):
            rows = r["timeline"]
            irsr = "-" if r["irsr"] is None else f"{100 * r['irsr']:.2f}%"
            style = dict(color=f"C{i}", marker=".", label=f"{r['label']} (IRSR {irsr} overall)")
            t = [row["t_s"] for row in rows]
            irsr_ax.plot(
                t,
                [100 * row["served_share"] if row["served_share"] is not None else None for row in rows],
                **style,
            )
            rtt_ax.plot(t, [row["rtt_mean_ms"] for row in rows], **style)
            rate_ax.plot(t, [row["items_claimed"] if row["requests"] else None for row in rows], **style)
        download = results["locust"]["setup"]["download_mean_ms"]
        rtt_ax.axhline(
            download, color="grey", linestyle=":", label=f"simulated download, mean ({download:g} ms)"
        )
        irsr_ax.set_ylabel("IRSR (% of /request\nanswered with items)")
        irsr_ax.set_ylim(bottom=min(90, irsr_ax.get_ylim()[0]), top=100.5)
        rtt_ax.set_ylabel("RTT claim to done,\nmean per second (ms)")
        rtt_ax.set_ylim(bottom=0)
        rate_ax.set_ylabel("items claimed per second")
        rate_ax.set_yscale("log")
        plain = matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:,.0f}")
        rate_ax.yaxis.set_major_formatter(plain)
        rate_ax.yaxis.set_minor_formatter(
            matplotlib.ticker.FuncFormatter(
                lambda value, _: f"{value:,.0f}" if f"{value:.0f}"[0] in "25" else ""
            )
        )
        rate_ax.tick_params(axis="y", which="minor", labelsize=7)
        rate_ax.set_xlabel(
            "seconds since the run's first answer (the first and last seconds "
            "are partial; at the end warriors only finish the claims in hand)"
        )
        for ax in (irsr_ax, rtt_ax, rate_ax):
            ax.grid(alpha=0.3)
        rtt_ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
        setup = results["locust"]["setup"]
        fig.suptitle(
            f"Locust warriors over time (Connection: close, download {setup['download_time_s']} s, "
            f"{100 * setup['fail_share']:g}% failed, {100 * setup['abandon_share']:g}% abandoned, "
            f"{results['date_utc']})"
        )
        fig.tight_layout()
        paths.append(out_dir / "server_irsr_rtt.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    return paths
