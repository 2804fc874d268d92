//! A server's message types from its reflection service
//! (`grpc.reflection.v1`, else `v1alpha`): the services it lists, then the
//! files that define each, with the files they import. Two calls on one
//! HTTP/2 connection, before any load.

use super::{flagged_frames, frame, Schema};
use headroom_http::h2::H2Connection;
use headroom_http::{Capture, Captured, ConnectOptions};
use prost::Message;
use prost_reflect::prost_types::FileDescriptorProto;
use prost_reflect::DescriptorPool;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

const SERVICES: [&str; 2] = [
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

#[derive(Clone, PartialEq, Message)]
struct Request {
    #[prost(string, optional, tag = "4")]
    file_containing_symbol: Option<String>,
    #[prost(string, optional, tag = "7")]
    list_services: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Response {
    #[prost(message, optional, tag = "4")]
    file_descriptor_response: Option<FileDescriptorResponse>,
    #[prost(message, optional, tag = "6")]
    list_services_response: Option<ListServiceResponse>,
    #[prost(message, optional, tag = "7")]
    error_response: Option<ErrorResponse>,
}

#[derive(Clone, PartialEq, Message)]
struct FileDescriptorResponse {
    #[prost(bytes = "vec", repeated, tag = "1")]
    file_descriptor_proto: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
struct ListServiceResponse {
    #[prost(message, repeated, tag = "1")]
    service: Vec<ServiceResponse>,
}

#[derive(Clone, PartialEq, Message)]
struct ServiceResponse {
    #[prost(string, tag = "1")]
    name: String,
}

#[derive(Clone, PartialEq, Message)]
struct ErrorResponse {
    #[prost(int32, tag = "1")]
    error_code: i32,
    #[prost(string, tag = "2")]
    error_message: String,
}

/// The schema the server at `addr` describes through its reflection
/// service (`authority` and `https` for the request's `:authority` and
/// `:scheme`), within `timeout`.
pub fn reflect(
    addr: SocketAddr,
    (authority, https): (&str, bool),
    options: ConnectOptions<'_>,
) -> Result<Schema, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let local = tokio::task::LocalSet::new();
    let timeout = options.timeout;
    let asked = local.block_on(&runtime, async {
        tokio::time::timeout(timeout, ask(addr, (authority, https), options)).await
    });
    match asked {
        Ok(result) => result,
        Err(_) => Err(format!(
            "its reflection service did not answer within {timeout:?}"
        )),
    }
}

async fn ask(
    addr: SocketAddr,
    (authority, https): (&str, bool),
    options: ConnectOptions<'_>,
) -> Result<Schema, String> {
    let connection = H2Connection::connect(addr, options)
        .await
        .map_err(|e| format!("cannot reach it over HTTP/2: {e:?}"))?;
    let call = Call {
        connection: &connection,
        authority,
        https,
    };
    let mut last = String::new();
    for service in SERVICES {
        let listed = call
            .exchange(
                service,
                &[Request {
                    list_services: Some(String::new()),
                    ..Request::default()
                }],
            )
            .await;
        let answers = match listed {
            Ok(a) => a,
            Err(e) => {
                last = e;
                continue;
            }
        };
        let names: Vec<String> = answers
            .iter()
            .filter_map(|r| r.list_services_response.as_ref())
            .flat_map(|l| l.service.iter().map(|s| s.name.clone()))
            .filter(|n| !n.starts_with("grpc.reflection."))
            .collect();
        if names.is_empty() {
            return Err("its reflection service lists no services".into());
        }
        let asks: Vec<Request> = names
            .iter()
            .map(|n| Request {
                file_containing_symbol: Some(n.clone()),
                ..Request::default()
            })
            .collect();
        let answers = call.exchange(service, &asks).await?;
        return pool_of(&answers).map(Schema::from_pool);
    }
    Err(format!("no reflection service answered: {last}"))
}

struct Call<'a> {
    connection: &'a H2Connection,
    authority: &'a str,
    https: bool,
}

impl Call<'_> {
    /// `requests` on one stream of `service`'s `ServerReflectionInfo`,
    /// its answers.
    async fn exchange(&self, service: &str, requests: &[Request]) -> Result<Vec<Response>, String> {
        let scheme = if self.https { "https" } else { "http" };
        let uri = format!(
            "{scheme}://{}/{service}/ServerReflectionInfo",
            self.authority
        );
        let head = http::Request::builder()
            .method("POST")
            .uri(uri)
            .version(http::Version::HTTP_2)
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            // A server that compresses its answers may compress these.
            .header("grpc-accept-encoding", "gzip")
            .body(())
            .map_err(|e| e.to_string())?;
        let body: Vec<u8> = requests
            .iter()
            .flat_map(|r| frame(&r.encode_to_vec()))
            .collect();
        let mut captured = Captured::default();
        let want = Capture {
            body: true,
            grpc: true,
            ..Capture::default()
        };
        let attempts = headroom_http::exchange::Attempts::default();
        let response = self
            .connection
            .exchange((head, body.into()), want, &mut captured, &attempts)
            .await
            .map_err(|e| format!("{service}: {e:?}"))?;
        if response.status != 200 {
            return Err(format!("{service}: HTTP status {}", response.status));
        }
        match captured.grpc_status {
            Some(0) => {}
            Some(code) => {
                return Err(format!(
                    "{service}: grpc-status {code} {}",
                    captured.grpc_message
                ))
            }
            None => return Err(format!("{service}: no grpc-status")),
        }
        let mut out = Vec::new();
        for (compressed, payload) in flagged_frames(&captured.body)? {
            let payload = crate::Compression::Gzip.unpacked(compressed, payload)?;
            let r = Response::decode(&payload[..]).map_err(|e| format!("{service}: {e}"))?;
            if let Some(e) = &r.error_response {
                return Err(format!(
                    "{service}: error {} {}",
                    e.error_code, e.error_message
                ));
            }
            out.push(r);
        }
        Ok(out)
    }
}

/// The files in the answers, added to a pool each after those it imports.
fn pool_of(answers: &[Response]) -> Result<DescriptorPool, String> {
    let mut files: BTreeMap<String, FileDescriptorProto> = BTreeMap::new();
    for r in answers {
        let Some(f) = &r.file_descriptor_response else {
            continue;
        };
        for bytes in &f.file_descriptor_proto {
            let file = FileDescriptorProto::decode(bytes.as_slice()).map_err(|e| e.to_string())?;
            files.insert(file.name().to_string(), file);
        }
    }
    let mut pool = DescriptorPool::new();
    let names: Vec<String> = files.keys().cloned().collect();
    for name in names {
        add(&mut pool, &mut files, &name)?;
    }
    Ok(pool)
}

fn add(
    pool: &mut DescriptorPool,
    files: &mut BTreeMap<String, FileDescriptorProto>,
    name: &str,
) -> Result<(), String> {
    let Some(file) = files.remove(name) else {
        // Added already, or well known (prost-reflect has those).
        return Ok(());
    };
    for dependency in &file.dependency {
        add(pool, files, dependency)?;
    }
    if pool.get_file_by_name(name).is_none() {
        pool.add_file_descriptor_proto(file)
            .map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

/// How long reflection may take at least (a connect timeout may be
/// shorter than two calls need).
pub const REFLECTION_TIMEOUT: Duration = Duration::from_secs(10);
