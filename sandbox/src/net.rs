//! Network: name lookup limited to the names granted, resolved once at
//! start for the per-address check.

use super::*;

pub(crate) mod lookup {
    //! `wasi:sockets/ip-name-lookup` that only resolves granted names.
    use super::GuestState;
    use wasmtime::component::{HasData, Resource};
    use wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::{Host, HostResolveAddressStream};
    use wasmtime_wasi::p2::bindings::sockets::network::{ErrorCode, IpAddress, Network};
    use wasmtime_wasi::p2::{DynPollable, SocketError};
    use wasmtime_wasi::sockets::WasiSocketsCtxView;

    pub struct Filtered;
    impl HasData for Filtered {
        type Data<'a> = FilteredView<'a>;
    }

    pub struct FilteredView<'a> {
        inner: WasiSocketsCtxView<'a>,
        names: &'a [(String, String)],
        audit: Option<&'a tickbox_telemetry::audit::Audit>,
    }

    pub fn filtered_view(s: &mut GuestState) -> FilteredView<'_> {
        let names = &s.lookup_names;
        let audit = s.audit.as_ref();
        // Split borrows: the sockets view borrows ctx and table, the filter
        // borrows the names; all three are distinct fields.
        let inner = WasiSocketsCtxView {
            ctx: s.ctx.sockets(),
            table: &mut s.table,
        };
        FilteredView {
            inner,
            names,
            audit,
        }
    }

    impl Host for FilteredView<'_> {
        fn resolve_addresses(
            &mut self,
            network: Resource<Network>,
            name: String,
        ) -> Result<
            Resource<wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::ResolveAddressStream>,
            SocketError,
        > {
            let Some((granted, grant)) = self
                .names
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(&name))
            else {
                tracing::info!(%name, "refused a name lookup that was not granted");
                if let Some(audit) = self.audit {
                    let denied = tickbox_telemetry::audit::DenialKind::Lookup;
                    audit.denied(denied, &name, "no allow_net grant names it");
                }
                return Err(ErrorCode::AccessDenied.into());
            };
            if let Some(audit) = self.audit {
                // The grant's spelling, not the guest's: the name as granted.
                audit.used(tickbox_telemetry::audit::Use::Lookup {
                    name: granted,
                    allow_net: grant,
                });
            }
            self.inner.resolve_addresses(network, name)
        }
    }

    impl HostResolveAddressStream for FilteredView<'_> {
        fn resolve_next_address(
            &mut self,
            r: Resource<wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::ResolveAddressStream>,
        ) -> Result<Option<IpAddress>, SocketError> {
            self.inner.resolve_next_address(r)
        }
        fn subscribe(
            &mut self,
            r: Resource<wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::ResolveAddressStream>,
        ) -> wasmtime::Result<Resource<DynPollable>> {
            HostResolveAddressStream::subscribe(&mut self.inner, r)
        }
        fn drop(
            &mut self,
            r: Resource<wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::ResolveAddressStream>,
        ) -> wasmtime::Result<()> {
            HostResolveAddressStream::drop(&mut self.inner, r)
        }
    }

    impl wasmtime_wasi::p2::bindings::sockets::network::HostNetwork for FilteredView<'_> {
        fn drop(&mut self, this: Resource<Network>) -> wasmtime::Result<()> {
            wasmtime_wasi::p2::bindings::sockets::network::HostNetwork::drop(&mut self.inner, this)
        }
    }

    impl wasmtime_wasi::p2::bindings::sockets::network::Host for FilteredView<'_> {
        fn convert_error_code(&mut self, error: SocketError) -> wasmtime::Result<ErrorCode> {
            self.inner.convert_error_code(error)
        }
        fn network_error_code(
            &mut self,
            err: Resource<wasmtime_wasi::p2::bindings::io::error::Error>,
        ) -> wasmtime::Result<Option<ErrorCode>> {
            self.inner.network_error_code(err)
        }
    }
}

/// Resolves granted names once at start, for the per-address check.
pub(crate) async fn resolve_names(grants: &Grants) -> Vec<(String, Vec<IpAddr>)> {
    let mut out = Vec::new();
    for name in grants.lookup_names() {
        let ips = match tokio::net::lookup_host((name.as_str(), 0)).await {
            Ok(addrs) => addrs.map(|a| a.ip()).collect(),
            Err(e) => {
                tracing::warn!(%name, error = %e, "a granted name does not resolve");
                Vec::new()
            }
        };
        out.push((name, ips));
    }
    out
}

/// Every preopen, in order: its guest path, write quota and grant (see
/// `quota`).
pub(crate) type Preopens = Vec<quota::Preopen>;
