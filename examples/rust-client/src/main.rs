//! A Rillet client in Rust: create a topic, produce structured records, fetch them back.
//!
//! Uses only the gRPC API in `proto/rillet/v1` (code generated at build time, see build.rs), in
//! Kafka's order: AdminService.CreateTopics, ProduceService.Produce with plain `Record`s (the
//! structured path: the broker builds the RecordBatch v2) and acks=1, then FetchService.Fetch with
//! `structured=true` (the broker decodes the batches). It checks that it read back exactly what it
//! wrote and exits non-zero, naming Kafka's error, on any failure.
//!
//! Every request goes to the bootstrap server: on a cluster of several brokers it works when that
//! broker leads every partition, and reports NOT_LEADER_OR_FOLLOWER otherwise.
//!
//! With `--ssl-cafile` it speaks TLS to an SSL listener (rustls), and with `--ssl-certfile` and
//! `--ssl-keyfile` it presents a client certificate (listeners with `ssl.client.auth=required`).

use std::fmt;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// The generated rillet.v1 messages and clients. They cover whole .proto files, of which this
/// example uses a part.
#[allow(dead_code)]
mod proto {
    tonic::include_proto!("rillet.v1");
}

use proto::admin_service_client::AdminServiceClient;
use proto::fetch_service_client::FetchServiceClient;
use proto::produce_service_client::ProduceServiceClient;
use proto::{
    CreateTopicsRequest, ErrorCode, FetchRequest, Header, IsolationLevel, ProduceRequest, Record,
    TimestampType, create_topics_request, fetch_request, produce_request,
};

/// How long a partition may answer with an error that means "not ready yet" (a topic the broker
/// has not learned about, a leader being elected) before the client gives up, and how long it
/// waits for the records it wrote to become readable.
const RETRY_DEADLINE: Duration = Duration::from_secs(15);
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

#[derive(Parser, Debug)]
#[command(about = "Create a topic, produce records to it and fetch them back from a Rillet broker")]
struct Args {
    /// The broker to talk to.
    #[arg(long, value_name = "HOST:PORT")]
    bootstrap_server: String,
    /// The topic to create and write to.
    #[arg(long, value_name = "NAME")]
    topic: String,
    /// The topic's partition count; record i goes to partition i % N.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(i32).range(1..))]
    partitions: i32,
    /// How many records to produce.
    #[arg(long, value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..))]
    count: u32,
    /// Use the topic if it already exists instead of failing with TOPIC_ALREADY_EXISTS.
    #[arg(long)]
    if_not_exists: bool,
    /// Speak TLS, trusting the CA certificates (PEM) in this file.
    #[arg(long, value_name = "FILE")]
    ssl_cafile: Option<String>,
    /// The client certificate (PEM) to present over TLS.
    #[arg(long, value_name = "FILE", requires_all = ["ssl_cafile", "ssl_keyfile"])]
    ssl_certfile: Option<String>,
    /// The client certificate's private key (PEM, unencrypted).
    #[arg(long, value_name = "FILE", requires = "ssl_certfile")]
    ssl_keyfile: Option<String>,
}

/// The TLS settings of the command line, read from their files (None: plaintext).
fn tls_config(args: &Args) -> Result<Option<ClientTlsConfig>, ClientError> {
    let Some(cafile) = &args.ssl_cafile else {
        return Ok(None);
    };
    let read = |path: &String| {
        std::fs::read(path).map_err(|e| ClientError::Check(format!("cannot read {path}: {e}")))
    };
    let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(cafile)?));
    if let (Some(cert), Some(key)) = (&args.ssl_certfile, &args.ssl_keyfile) {
        tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
    }
    Ok(Some(tls))
}

/// Why the program failed. Kafka errors keep Kafka's name; transport failures keep gRPC's status.
#[derive(Debug)]
enum ClientError {
    /// A result carried an error_code other than NONE.
    Kafka {
        what: String,
        code: i32,
        message: String,
    },
    /// The call itself failed (the broker is down, a deadline passed, ...).
    Rpc { what: String, status: tonic::Status },
    /// No connection to the bootstrap server.
    Connect {
        server: String,
        source: tonic::transport::Error,
    },
    /// The broker answered, but not what the protocol promises or what was written.
    Check(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Kafka {
                what,
                code,
                message,
            } => {
                write!(f, "{what}: {} (error code {code})", error_name(*code))?;
                if !message.is_empty() {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
            ClientError::Rpc { what, status } => write!(
                f,
                "{what}: gRPC status {:?}: {}",
                status.code(),
                status.message()
            ),
            ClientError::Connect { server, source } => {
                write!(f, "cannot connect to {server}: {source}")?;
                let mut cause = std::error::Error::source(source);
                while let Some(c) = cause {
                    write!(f, ": {c}")?;
                    cause = c.source();
                }
                Ok(())
            }
            ClientError::Check(message) => f.write_str(message),
        }
    }
}

/// Kafka's name for an error code; a code this client does not know is UNKNOWN_SERVER_ERROR, as
/// common.proto asks.
fn error_name(code: i32) -> &'static str {
    ErrorCode::try_from(code)
        .unwrap_or(ErrorCode::UnknownServerError)
        .as_str_name()
}

/// Ok for NONE, the Kafka error otherwise.
fn check(what: impl FnOnce() -> String, code: i32, message: &str) -> Result<(), ClientError> {
    if code == ErrorCode::None as i32 {
        return Ok(());
    }
    Err(ClientError::Kafka {
        what: what(),
        code,
        message: message.to_owned(),
    })
}

/// Errors after which the broker has not appended (or read) anything and the same request may
/// succeed shortly: the broker has not caught up with a just-created topic yet.
fn is_not_ready(code: i32) -> bool {
    [
        ErrorCode::UnknownTopicOrPartition,
        ErrorCode::LeaderNotAvailable,
        ErrorCode::NotLeaderOrFollower,
    ]
    .iter()
    .any(|e| *e as i32 == code)
}

fn rpc_error(what: &str) -> impl FnOnce(tonic::Status) -> ClientError + '_ {
    move |status| ClientError::Rpc {
        what: what.to_owned(),
        status,
    }
}

async fn connect(
    bootstrap_server: &str,
    tls: Option<ClientTlsConfig>,
) -> Result<Channel, ClientError> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let uri = if bootstrap_server.contains("://") {
        bootstrap_server.to_owned()
    } else {
        format!("{scheme}://{bootstrap_server}")
    };
    let connect_error = |source| ClientError::Connect {
        server: bootstrap_server.to_owned(),
        source,
    };
    let mut endpoint = Endpoint::from_shared(uri).map_err(connect_error)?;
    if let Some(tls) = tls {
        endpoint = endpoint.tls_config(tls).map_err(connect_error)?;
    }
    endpoint
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(60))
        .connect()
        .await
        .map_err(connect_error)
}

/// AdminService.CreateTopics for one topic with the broker's default replication factor.
async fn create_topic(
    channel: Channel,
    topic: &str,
    partitions: i32,
    if_not_exists: bool,
) -> Result<(), ClientError> {
    let request = CreateTopicsRequest {
        topics: vec![create_topics_request::Topic {
            name: topic.to_owned(),
            num_partitions: Some(partitions),
            ..Default::default()
        }],
        timeout_ms: 30_000,
        validate_only: false,
    };
    let response = AdminServiceClient::new(channel)
        .create_topics(request)
        .await
        .map_err(rpc_error("CreateTopics"))?
        .into_inner();
    let [result] = response.topics.as_slice() else {
        return Err(ClientError::Check(format!(
            "CreateTopics: expected 1 topic result, got {}",
            response.topics.len()
        )));
    };
    if if_not_exists && result.error_code == ErrorCode::TopicAlreadyExists as i32 {
        println!("Topic {topic} already exists.");
        return Ok(());
    }
    check(
        || format!("CreateTopics {topic}"),
        result.error_code,
        &result.error_message,
    )?;
    println!(
        "Created topic {topic} with {} partitions (replication factor {}).",
        result.num_partitions, result.replication_factor
    );
    Ok(())
}

/// What one partition was sent, and where the broker put it.
struct Written {
    partition: i32,
    records: Vec<Record>,
    base_offset: i64,
}

/// The records to produce: record i goes to partition i % partitions, with a key, a value, a
/// header and the client's timestamp, so every field of the structured path makes the round trip.
fn build_records(count: u32, partitions: i32) -> Vec<Written> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut written: Vec<Written> = (0..partitions)
        .map(|partition| Written {
            partition,
            records: Vec::new(),
            base_offset: -1,
        })
        .collect();
    for i in 0..count {
        let record = Record {
            key: Some(format!("key-{i}").into_bytes()),
            value: Some(format!("value-{i}").into_bytes()),
            headers: vec![Header {
                key: "seq".to_owned(),
                value: Some(i.to_string().into_bytes()),
            }],
            timestamp_ms: Some(now_ms),
            ..Default::default()
        };
        // u32 % a positive i32 fits in usize and indexes `written`.
        let p = (i as usize) % written.len();
        written[p].records.push(record);
    }
    written.retain(|w| !w.records.is_empty());
    written
}

/// ProduceService.Produce with acks=1, the structured path. Partitions that answer "not ready"
/// are sent again (nothing was appended to them); any other error fails.
async fn produce(
    channel: Channel,
    topic: &str,
    written: &mut [Written],
) -> Result<(), ClientError> {
    let mut client = ProduceServiceClient::new(channel);
    let deadline = Instant::now() + RETRY_DEADLINE;
    loop {
        let pending: Vec<usize> = (0..written.len())
            .filter(|&i| written[i].base_offset < 0)
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        let request = ProduceRequest {
            acks: 1,
            timeout_ms: 30_000,
            transactional_id: None,
            topics: vec![produce_request::Topic {
                name: topic.to_owned(),
                partitions: pending
                    .iter()
                    .map(|&i| produce_request::Partition {
                        partition: written[i].partition,
                        records: written[i].records.clone(),
                        ..Default::default()
                    })
                    .collect(),
            }],
        };
        let response = client
            .produce(request)
            .await
            .map_err(rpc_error("Produce"))?
            .into_inner();
        let [topic_result] = response.topics.as_slice() else {
            return Err(ClientError::Check(format!(
                "Produce: expected 1 topic result, got {}",
                response.topics.len()
            )));
        };
        if topic_result.partitions.len() != pending.len() {
            return Err(ClientError::Check(format!(
                "Produce: expected {} partition results, got {}",
                pending.len(),
                topic_result.partitions.len()
            )));
        }
        for (&i, result) in pending.iter().zip(&topic_result.partitions) {
            let w = &mut written[i];
            if is_not_ready(result.error_code) && Instant::now() < deadline {
                continue;
            }
            for e in &result.record_errors {
                eprintln!(
                    "  record {} of {topic}-{} rejected: {}",
                    e.batch_index, w.partition, e.batch_index_error_message
                );
            }
            check(
                || format!("Produce {topic}-{}", w.partition),
                result.error_code,
                &result.error_message,
            )?;
            if result.partition != w.partition || result.base_offset < 0 {
                return Err(ClientError::Check(format!(
                    "Produce {topic}-{}: answer for partition {} with base offset {}",
                    w.partition, result.partition, result.base_offset
                )));
            }
            w.base_offset = result.base_offset;
            let n = w.records.len();
            let noun = if n == 1 { "record" } else { "records" };
            println!(
                "Produced {n} {noun} to {topic}-{} at base offset {}",
                w.partition, w.base_offset
            );
        }
        if written.iter().any(|w| w.base_offset < 0) {
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
    }
}

/// FetchService.Fetch with structured=true from each partition's base offset until every
/// written record has been read back (or the deadline passes).
async fn fetch(
    channel: Channel,
    topic: &str,
    written: &[Written],
) -> Result<Vec<Vec<Record>>, ClientError> {
    let mut client = FetchServiceClient::new(channel);
    let mut read: Vec<Vec<Record>> = written.iter().map(|_| Vec::new()).collect();
    let deadline = Instant::now() + RETRY_DEADLINE;
    loop {
        let pending: Vec<usize> = (0..written.len())
            .filter(|&i| read[i].len() < written[i].records.len())
            .collect();
        if pending.is_empty() {
            return Ok(read);
        }
        if Instant::now() >= deadline {
            let i = pending[0];
            return Err(ClientError::Check(format!(
                "Fetch {topic}-{}: read {} of the {} records written at base offset {} within {:?}",
                written[i].partition,
                read[i].len(),
                written[i].records.len(),
                written[i].base_offset,
                RETRY_DEADLINE
            )));
        }
        let request = FetchRequest {
            max_wait_ms: 500,
            min_bytes: 1,
            isolation_level: IsolationLevel::ReadUncommitted as i32,
            structured: true,
            topics: vec![fetch_request::Topic {
                name: topic.to_owned(),
                partitions: pending
                    .iter()
                    .map(|&i| fetch_request::Partition {
                        partition: written[i].partition,
                        fetch_offset: next_offset(&written[i], &read[i]),
                        ..Default::default()
                    })
                    .collect(),
            }],
            ..Default::default()
        };
        let response = client
            .fetch(request)
            .await
            .map_err(rpc_error("Fetch"))?
            .into_inner();
        check(
            || format!("Fetch {topic}"),
            response.error_code,
            &response.error_message,
        )?;
        let [topic_result] = response.topics.as_slice() else {
            return Err(ClientError::Check(format!(
                "Fetch: expected 1 topic result, got {}",
                response.topics.len()
            )));
        };
        if topic_result.partitions.len() != pending.len() {
            return Err(ClientError::Check(format!(
                "Fetch: expected {} partition results, got {}",
                pending.len(),
                topic_result.partitions.len()
            )));
        }
        let mut got_any = false;
        for (&i, result) in pending.iter().zip(&topic_result.partitions) {
            let w = &written[i];
            if is_not_ready(result.error_code) {
                continue;
            }
            check(
                || format!("Fetch {topic}-{}", w.partition),
                result.error_code,
                &result.error_message,
            )?;
            let from = next_offset(w, &read[i]);
            let wanted = w.records.len() - read[i].len();
            // Records written after ours (by another client) are not part of the check.
            let new: Vec<Record> = result
                .records
                .iter()
                .filter(|r| r.offset >= from)
                .take(wanted)
                .cloned()
                .collect();
            got_any |= !new.is_empty();
            read[i].extend(new);
        }
        if !got_any {
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
    }
}

fn next_offset(w: &Written, read: &[Record]) -> i64 {
    read.last().map_or(w.base_offset, |r| r.offset + 1)
}

fn show(bytes: Option<&[u8]>) -> String {
    bytes.map_or_else(
        || "null".to_owned(),
        |b| String::from_utf8_lossy(b).into_owned(),
    )
}

/// The record read at position j of a partition must be the j-th record written to it, at
/// base_offset + j, with the same key, value, headers and (with CreateTime) timestamp.
fn compare(topic: &str, written: &[Written], read: &[Vec<Record>]) -> Result<(), ClientError> {
    for (w, got) in written.iter().zip(read) {
        for (j, (sent, back)) in w.records.iter().zip(got).enumerate() {
            let expected_offset = w.base_offset + j as i64;
            let timestamp_ok = back.timestamp_type != TimestampType::CreateTime as i32
                || back.timestamp_ms == sent.timestamp_ms;
            if back.offset != expected_offset
                || back.key != sent.key
                || back.value != sent.value
                || back.headers != sent.headers
                || !timestamp_ok
            {
                return Err(ClientError::Check(format!(
                    "read back something else than was written to {topic}-{}: \
                     wrote offset={expected_offset} key={} value={} headers={:?} timestamp={:?}, \
                     read offset={} key={} value={} headers={:?} timestamp={:?}",
                    w.partition,
                    show(sent.key.as_deref()),
                    show(sent.value.as_deref()),
                    sent.headers,
                    sent.timestamp_ms,
                    back.offset,
                    show(back.key.as_deref()),
                    show(back.value.as_deref()),
                    back.headers,
                    back.timestamp_ms,
                )));
            }
        }
        if got.len() != w.records.len() {
            return Err(ClientError::Check(format!(
                "{topic}-{}: wrote {} records, read {}",
                w.partition,
                w.records.len(),
                got.len()
            )));
        }
    }
    Ok(())
}

async fn run(args: Args) -> Result<(), ClientError> {
    let channel = connect(&args.bootstrap_server, tls_config(&args)?).await?;
    create_topic(
        channel.clone(),
        &args.topic,
        args.partitions,
        args.if_not_exists,
    )
    .await?;

    let mut written = build_records(args.count, args.partitions);
    produce(channel.clone(), &args.topic, &mut written).await?;

    let read = fetch(channel, &args.topic, &written).await?;
    for (w, records) in written.iter().zip(&read) {
        for r in records {
            println!(
                "{}-{} offset={} key={} value={}",
                args.topic,
                w.partition,
                r.offset,
                show(r.key.as_deref()),
                show(r.value.as_deref())
            );
        }
    }
    compare(&args.topic, &written, &read)?;
    println!(
        "Read back all {} records; they match what was written.",
        args.count
    );
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
