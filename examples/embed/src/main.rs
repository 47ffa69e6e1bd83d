//! Embedding tickbox: open an `oci://` Tick under a signers policy and a
//! lock, call one tool and print its result, with tickbox-app alone.
//!
//! `tickbox-embed REF SIGNERS LOCK STORE TOOL ARGS_JSON`: SIGNERS is a
//! signers policy file (an unsigned Tick, or one signed by a key it does
//! not list, is refused before anything runs), LOCK a lock file (a tag it
//! pins runs at the pinned digest), STORE where pulled Ticks are kept.

use tickbox_app::{App, CallOutcome, Request, Settings, Target};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [reference, signers, lock, store, tool, json] = <[String; 6]>::try_from(args)
        .map_err(|_| "usage: tickbox-embed REF SIGNERS LOCK STORE TOOL ARGS_JSON")?;
    // Settings are the embedder's to choose: nothing is read from the environment.
    let app = App::new(Settings {
        store_dir: Some(store.into()),
        ..Settings::default()
    });
    let mut request = Request::new(Target::Oci(reference));
    request.registry.signers = Some(tickbox_app::source(signers.into()));
    request.registry.lock = Some(tickbox_app::source(lock.into()));
    let tick = app.open(&request).await?;
    let catalog = tick.session.descriptor().ok_or("no descriptor")?;
    let call = catalog.prepare(&tool, serde_json::from_str(&json)?)?;
    let outcome = tick.session.call(&call).await;
    tick.close().await;
    match outcome {
        CallOutcome::Ok(result) => println!("{result}"), // stdout-ok: the example prints its result
        // The Tick's words, escaped by their Display.
        CallOutcome::Failed { error, .. } => return Err(format!("{}", error.message).into()),
        CallOutcome::Unknown(why) => return Err(format!("unknown outcome: {why}").into()),
    }
    Ok(())
}
