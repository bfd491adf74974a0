//! NATS JetStream peer benchmark for `bench/peers.py`.
//!
//! Against a running `nats-server -js`, it:
//!
//! 1. creates a file-backed stream (`StorageType::File`, one replica, limits retention);
//! 2. samples unloaded produce latency: `--latency-samples` publishes, each awaited for its
//!    ack before the next is sent, on a separate scratch stream that is deleted afterwards;
//! 3. produces `--records` messages of `--record-size` bytes with acknowledged async publish,
//!    keeping at most `--window` `PublishAckFuture`s in flight and awaiting every ack
//!    (the time until the last ack is in is the produce time);
//! 4. checks the stream holds exactly `--records` messages;
//! 5. reads them all back with a pull consumer (`AckPolicy::None`) in large batches
//!    (`--consume-mode stream`: the client's continuous pull with `--batch` messages per pull
//!    request, re-pulling before the buffer runs dry; `fetch`: one `fetch` of `--batch`
//!    messages after another), each pull also capped at 24 MiB so the server's per-client
//!    `max_pending` (64 MiB) is never hit, counting messages and payload bytes.
//!
//! Every message carries the same value: the bytes of `--payload-file`, or else
//! `--record-size` pseudo-random bytes. It prints one JSON object on stdout. Rates: records/s and MB/s with 1 MB = 1e6 bytes of
//! payload (message values only, no subjects or protocol framing).

use std::collections::VecDeque;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer, stream};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::json;

/// Upper bound of the bytes asked for by one pull request.
const MAX_PULL_BYTES: usize = 24 << 20;
/// A consume that sees no message for this long fails instead of hanging.
const IDLE_TIMEOUT: Duration = Duration::from_secs(20);

type Error = Box<dyn std::error::Error + Send + Sync>;

const USAGE: &str = "usage: nats-bench [--server URL] [--records N] [--record-size BYTES] \
[--window N] [--batch N] [--consume-mode stream|fetch] [--latency-samples N] [--threads N] \
[--stream NAME] [--payload-file PATH]";

#[derive(Debug, Clone)]
struct Args {
    server: String,
    records: usize,
    record_size: usize,
    window: usize,
    batch: usize,
    consume_mode: String,
    latency_samples: usize,
    threads: usize,
    stream: String,
    payload_file: Option<String>,
}

impl Args {
    fn parse() -> Result<Args, String> {
        let mut args = Args {
            server: "127.0.0.1:4222".to_string(),
            records: 100_000,
            record_size: 1024,
            window: 1024,
            batch: 10_000,
            consume_mode: "stream".to_string(),
            latency_samples: 2000,
            threads: 0,
            stream: "BENCH".to_string(),
            payload_file: None,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            if flag == "-h" || flag == "--help" {
                return Err(String::new());
            }
            let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let num = || -> Result<usize, String> {
                value
                    .parse::<usize>()
                    .map_err(|e| format!("{flag} {value}: {e}"))
            };
            match flag.as_str() {
                "--server" => args.server = value.clone(),
                "--records" => args.records = num()?,
                "--record-size" => args.record_size = num()?,
                "--window" => args.window = num()?,
                "--batch" => args.batch = num()?,
                "--consume-mode" => args.consume_mode = value.clone(),
                "--latency-samples" => args.latency_samples = num()?,
                "--threads" => args.threads = num()?,
                "--stream" => args.stream = value.clone(),
                "--payload-file" => args.payload_file = Some(value.clone()),
                _ => return Err(format!("unknown flag {flag}")),
            }
        }
        if args.records == 0 || args.window == 0 || args.batch == 0 {
            return Err("--records, --window and --batch must be positive".to_string());
        }
        if args.consume_mode != "stream" && args.consume_mode != "fetch" {
            return Err(format!(
                "--consume-mode {}: want stream or fetch",
                args.consume_mode
            ));
        }
        Ok(args)
    }
}

/// `record_size` bytes from xorshift64*: incompressible enough, identical on every run.
fn make_payload(record_size: usize) -> Bytes {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity(record_size + 8);
    while out.len() < record_size {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(record_size);
    Bytes::from(out)
}

/// Nearest-rank percentile of sorted durations, in milliseconds.
fn percentile_ms(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q / 100.0) * sorted.len() as f64).ceil() as usize;
    let idx = rank.clamp(1, sorted.len()) - 1;
    sorted[idx].as_secs_f64() * 1e3
}

fn latency_json(mut samples: Vec<Duration>) -> serde_json::Value {
    samples.sort_unstable();
    let mean = if samples.is_empty() {
        f64::NAN
    } else {
        samples.iter().map(Duration::as_secs_f64).sum::<f64>() / samples.len() as f64 * 1e3
    };
    json!({
        "samples": samples.len(),
        "p50_ms": percentile_ms(&samples, 50.0),
        "p99_ms": percentile_ms(&samples, 99.0),
        "p999_ms": percentile_ms(&samples, 99.9),
        "max_ms": samples.last().map_or(f64::NAN, |d| d.as_secs_f64() * 1e3),
        "mean_ms": mean,
    })
}

fn file_stream(name: &str, subject: &str) -> stream::Config {
    stream::Config {
        name: name.to_string(),
        subjects: vec![subject.to_string()],
        storage: stream::StorageType::File,
        num_replicas: 1,
        ..Default::default()
    }
}

async fn recreate_stream(
    js: &jetstream::Context,
    config: stream::Config,
) -> Result<stream::Stream, Error> {
    // A leftover stream from an earlier run would skew the counts.
    let _ = js.delete_stream(&config.name).await;
    Ok(js.create_stream(config).await?)
}

/// Unloaded produce latency: publish, await the ack, repeat.
async fn sample_latency(
    js: &jetstream::Context,
    args: &Args,
    payload: &Bytes,
) -> Result<serde_json::Value, Error> {
    let name = format!("{}_LAT", args.stream);
    let subject = format!("{}.lat", args.stream.to_lowercase());
    recreate_stream(js, file_stream(&name, &subject)).await?;
    let mut samples = Vec::with_capacity(args.latency_samples);
    for _ in 0..args.latency_samples {
        let t0 = Instant::now();
        js.publish(subject.clone(), payload.clone()).await?.await?;
        samples.push(t0.elapsed());
    }
    js.delete_stream(&name).await?;
    Ok(latency_json(samples))
}

struct Produced {
    elapsed: Duration,
    last_sequence: u64,
    ack_latency: Vec<Duration>,
}

async fn produce(
    js: &jetstream::Context,
    args: &Args,
    subject: &str,
    payload: &Bytes,
) -> Result<Produced, Error> {
    let mut in_flight: VecDeque<(Instant, jetstream::context::PublishAckFuture)> =
        VecDeque::with_capacity(args.window);
    // `Subject` is reference-counted: cloning it per publish allocates nothing.
    let subject = async_nats::Subject::from(subject);
    let mut ack_latency = Vec::with_capacity(args.records);
    let mut last_sequence = 0u64;
    let mut acks = 0usize;
    let start = Instant::now();
    for _ in 0..args.records {
        if in_flight.len() >= args.window {
            let (sent, fut) = in_flight.pop_front().expect("window is non-empty");
            let ack = fut.await?;
            ack_latency.push(sent.elapsed());
            last_sequence = last_sequence.max(ack.sequence);
            acks += 1;
        }
        let sent = Instant::now();
        let fut = js.publish(subject.clone(), payload.clone()).await?;
        in_flight.push_back((sent, fut));
    }
    while let Some((sent, fut)) = in_flight.pop_front() {
        let ack = fut.await?;
        ack_latency.push(sent.elapsed());
        last_sequence = last_sequence.max(ack.sequence);
        acks += 1;
    }
    let elapsed = start.elapsed();
    if acks != args.records {
        return Err(format!("got {acks} acks for {} publishes", args.records).into());
    }
    Ok(Produced {
        elapsed,
        last_sequence,
        ack_latency,
    })
}

/// The next item of `stream`, or an error once nothing came for [`IDLE_TIMEOUT`].
async fn next_or_idle<S: futures::Stream + Unpin>(
    stream: &mut S,
    records: usize,
) -> Result<Option<S::Item>, Error> {
    tokio::time::timeout(IDLE_TIMEOUT, stream.next())
        .await
        .map_err(|_| format!("no message for {IDLE_TIMEOUT:?} after {records} records").into())
}

struct Consumed {
    elapsed: Duration,
    records: usize,
    bytes: usize,
    bad_sizes: usize,
    pulls: usize,
}

async fn consume(stream: &stream::Stream, args: &Args) -> Result<Consumed, Error> {
    let pull: consumer::PullConsumer = stream
        .create_consumer(consumer::pull::Config {
            durable_name: Some("bench_reader".to_string()),
            ack_policy: consumer::AckPolicy::None,
            deliver_policy: consumer::DeliverPolicy::All,
            ..Default::default()
        })
        .await?;
    // nats-server cuts off a client whose unsent data passes its max_pending (64 MiB by
    // default) and drops what it had queued, so a pull must stay well below that: with the
    // continuous pull one batch and half of the next can be in flight.
    let max_bytes = args
        .batch
        .saturating_mul(args.record_size + 128)
        .min(MAX_PULL_BYTES);
    let mut records = 0usize;
    let mut bytes = 0usize;
    let mut bad_sizes = 0usize;
    let mut pulls = 0usize;
    let start = Instant::now();
    if args.consume_mode == "stream" {
        let mut messages = pull
            .stream()
            .max_messages_per_batch(args.batch)
            .max_bytes_per_batch(max_bytes)
            .messages()
            .await?;
        pulls = 1;
        while records < args.records {
            let Some(message) = next_or_idle(&mut messages, records).await? else {
                break;
            };
            let message = message?;
            let len = message.payload.len();
            bytes += len;
            bad_sizes += usize::from(len != args.record_size);
            records += 1;
        }
    } else {
        while records < args.records {
            let want = args.batch.min(args.records - records);
            let mut batch = pull
                .fetch()
                .max_messages(want)
                .max_bytes(max_bytes)
                .messages()
                .await?;
            pulls += 1;
            let before = records;
            while let Some(message) = next_or_idle(&mut batch, records).await? {
                let message = message?;
                let len = message.payload.len();
                bytes += len;
                bad_sizes += usize::from(len != args.record_size);
                records += 1;
            }
            if records == before {
                return Err(format!("fetch returned nothing after {records} records").into());
            }
        }
    }
    Ok(Consumed {
        elapsed: start.elapsed(),
        records,
        bytes,
        bad_sizes,
        pulls,
    })
}

async fn run(args: Args) -> Result<serde_json::Value, Error> {
    let client = async_nats::ConnectOptions::new()
        .name("rillet-nats-bench")
        .connect(args.server.as_str())
        .await?;
    let server_version = client.server_info().version.clone();
    // Our own window bounds the in-flight acks; the context's semaphore must not be tighter.
    let js = jetstream::context::ContextBuilder::new()
        .max_ack_inflight(args.window.max(1) + 16)
        .timeout(Duration::from_secs(30))
        .build(client.clone());
    let payload = match &args.payload_file {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|e| format!("--payload-file {path}: {e}"))?;
            if bytes.len() != args.record_size {
                return Err(format!(
                    "--payload-file {path} holds {} bytes, --record-size is {}",
                    bytes.len(),
                    args.record_size
                )
                .into());
            }
            Bytes::from(bytes)
        }
        None => make_payload(args.record_size),
    };

    let latency = if args.latency_samples > 0 {
        sample_latency(&js, &args, &payload).await?
    } else {
        serde_json::Value::Null
    };

    let subject = format!("{}.data", args.stream.to_lowercase());
    let mut stream = recreate_stream(&js, file_stream(&args.stream, &subject)).await?;

    let produced = produce(&js, &args, &subject, &payload).await?;
    let info = stream.info().await?;
    let stored = info.state.messages;
    let stored_bytes = info.state.bytes;
    if stored != args.records as u64 || produced.last_sequence != args.records as u64 {
        return Err(format!(
            "stream holds {stored} messages (last acked sequence {}), expected {}",
            produced.last_sequence, args.records
        )
        .into());
    }

    let consumed = consume(&stream, &args).await?;
    if consumed.records != args.records || consumed.bad_sizes != 0 {
        return Err(format!(
            "consumed {} records ({} of the wrong size), expected {}",
            consumed.records, consumed.bad_sizes, args.records
        )
        .into());
    }
    js.delete_stream(&args.stream).await?;
    client.flush().await?;

    let n = args.records as f64;
    let produce_s = produced.elapsed.as_secs_f64();
    let consume_s = consumed.elapsed.as_secs_f64();
    let produce_bytes = n * args.record_size as f64;
    Ok(json!({
        "system": "nats-jetstream",
        "server_version": server_version,
        "records": args.records,
        "record_size": args.record_size,
        "window": args.window,
        "batch": args.batch,
        "consume_mode": args.consume_mode,
        "threads": args.threads,
        "storage": "file",
        "produce_elapsed_s": produce_s,
        "produce_records_per_sec": n / produce_s,
        "produce_mb_per_sec": produce_bytes / produce_s / 1e6,
        "produce_ack_latency_under_load": latency_json(produced.ack_latency),
        "produce_latency_unloaded": latency,
        "stream_messages": stored,
        "stream_bytes": stored_bytes,
        "last_acked_sequence": produced.last_sequence,
        "consume_elapsed_s": consume_s,
        "consume_records": consumed.records,
        "consume_bytes": consumed.bytes,
        "consume_pulls": consumed.pulls,
        "consume_records_per_sec": consumed.records as f64 / consume_s,
        "consume_mb_per_sec": consumed.bytes as f64 / consume_s / 1e6,
    }))
}

fn main() -> ExitCode {
    let args = match Args::parse() {
        Ok(args) => args,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("nats-bench: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = if args.threads == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads)
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("nats-bench: tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("nats-bench: {err}");
            ExitCode::FAILURE
        }
    }
}
