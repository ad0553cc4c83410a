//! The command: read the state once (twice, [`RATE_WINDOW`] apart, for
//! the rates) and print the view, or with `--watch` redraw it every
//! interval until Ctrl-C or SIGTERM.
//!
//! Owns the timing and the terminal; a failed reading ends a one-shot
//! `status` but is shown in place of the view by `--watch` (walrelay may
//! be restarting).

use std::io::{self, Write};
use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};

use super::client::Client;
use super::snapshot::Snapshot;
use super::view::render_view;
use super::{StatusError, StatusOptions};

/// Time between the two readings of a one-shot `status`, for the rates.
pub(crate) const RATE_WINDOW: Duration = Duration::from_secs(1);
/// ANSI: clear the screen and move the cursor home.
pub(super) const CLEAR_SCREEN: &str = "\x1b[2J\x1b[H";

/// `walrelay status`: prints the view to stdout (see [`run_status_to`]).
pub(crate) async fn run_status(opts: StatusOptions) -> Result<(), StatusError> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    run_status_to(opts, &mut out).await
}

/// Writes the view to `out`. Once: two readings [`RATE_WINDOW`] apart
/// (for the rates), then the view; a failed reading, or an
/// `opts.pipeline` the process does not run, is the error. With
/// `opts.watch`: the screen is cleared and redrawn every interval until
/// Ctrl-C or SIGTERM (then `Ok`), and a failed reading is shown in place
/// of the view (walrelay may be restarting) rather than ending the loop.
/// What the view shows never makes this an error: a failed or unready
/// pipeline is reported, not returned (the `Result` says whether walrelay
/// could be read).
pub async fn run_status_to<W: Write>(opts: StatusOptions, out: &mut W) -> Result<(), StatusError> {
    let client = Client::with_access(opts.timeout, &opts.access)?;
    let first = Snapshot::take(&client, &opts.url).await?;
    let Some(every) = opts.watch else {
        tokio::time::sleep(RATE_WINDOW).await;
        let second = Snapshot::take(&client, &opts.url).await?;
        let view = render_view(&second, Some(&first), opts.pipeline.as_deref())?;
        return show(out, &view);
    };
    // Installed once, before the first wait, so an interrupt that arrives
    // during a reading is not lost.
    let mut interrupt = signal(SignalKind::interrupt()).map_err(StatusError::Signal)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(StatusError::Signal)?;
    let mut screen = format!(
        "{CLEAR_SCREEN}{}",
        render_view(&first, None, opts.pipeline.as_deref())?
    );
    let mut previous = first;
    loop {
        show(out, &screen)?;
        let next = async {
            tokio::time::sleep(every).await;
            Snapshot::take(&client, &opts.url).await
        };
        let read = tokio::select! {
            biased;
            _ = interrupt.recv() => return Ok(()),
            _ = terminate.recv() => return Ok(()),
            read = next => read,
        };
        // A failed reading, or a pipeline gone after a restart with another
        // configuration, is shown in place of the view: walrelay may be
        // restarting.
        let view = read.map_err(StatusError::from).and_then(|current| {
            let view = render_view(&current, Some(&previous), opts.pipeline.as_deref());
            previous = current;
            view
        });
        screen = match view {
            Ok(view) => format!("{CLEAR_SCREEN}{view}"),
            Err(e) => format!(
                "{CLEAR_SCREEN}{}\nretrying every {every:?}\n",
                crate::chain::DisplayChain(&e)
            ),
        };
    }
}

fn show<W: Write>(out: &mut W, text: &str) -> Result<(), StatusError> {
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(StatusError::Output)
}
