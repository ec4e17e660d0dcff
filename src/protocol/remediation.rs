//! The words of the contract's remediation and refusal detail: `remediation.action` (what the
//! user or host must do) and `context.reason` (why a tool refused or stopped), as enums so a
//! call site cannot misspell one and the set is reviewable in one place. Names only: which
//! error carries which word is decided where the error is built. No I/O.

/// Every `remediation.action` of the Host API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RemediationAction {
    AllowRemoteDebugging,
    ApproveInBrowser,
    CallBrowserConnect,
    CaptureAgain,
    ChangeKey,
    CheckClientFile,
    ChoosePath,
    ChoosePrivateHome,
    CreateLease,
    CreateWorkspace,
    Discover,
    FixRemoteConfig,
    FreeResources,
    GetCommand,
    InspectState,
    InstallChromium,
    InstallExecutable,
    LaunchManagedBrowser,
    ListDialogs,
    ListFrames,
    ListTabs,
    NarrowRequest,
    Observe,
    ObserveAgain,
    OpenTab,
    OpenView,
    RebuildState,
    ReleaseUnused,
    RemoveForeignEndpoint,
    RequestCapability,
    ResolveOverlayFirst,
    RestartSession,
    RestartUnresponsiveBroker,
    SetHome,
    StartBrowser,
    SubmitSeparately,
    UseAbsolutePath,
    UseCompatibleExecutable,
    UseHeadlessBrowser,
    UseNewKey,
    WaitForHandBack,
    WaitForRelease,
}

impl RemediationAction {
    /// Every variant, in the order of their wire words.
    pub const ALL: &'static [RemediationAction] = &[
        RemediationAction::AllowRemoteDebugging,
        RemediationAction::ApproveInBrowser,
        RemediationAction::CallBrowserConnect,
        RemediationAction::CaptureAgain,
        RemediationAction::ChangeKey,
        RemediationAction::CheckClientFile,
        RemediationAction::ChoosePath,
        RemediationAction::ChoosePrivateHome,
        RemediationAction::CreateLease,
        RemediationAction::CreateWorkspace,
        RemediationAction::Discover,
        RemediationAction::FixRemoteConfig,
        RemediationAction::FreeResources,
        RemediationAction::GetCommand,
        RemediationAction::InspectState,
        RemediationAction::InstallChromium,
        RemediationAction::InstallExecutable,
        RemediationAction::LaunchManagedBrowser,
        RemediationAction::ListDialogs,
        RemediationAction::ListFrames,
        RemediationAction::ListTabs,
        RemediationAction::NarrowRequest,
        RemediationAction::Observe,
        RemediationAction::ObserveAgain,
        RemediationAction::OpenTab,
        RemediationAction::OpenView,
        RemediationAction::RebuildState,
        RemediationAction::ReleaseUnused,
        RemediationAction::RemoveForeignEndpoint,
        RemediationAction::RequestCapability,
        RemediationAction::ResolveOverlayFirst,
        RemediationAction::RestartSession,
        RemediationAction::RestartUnresponsiveBroker,
        RemediationAction::SetHome,
        RemediationAction::StartBrowser,
        RemediationAction::SubmitSeparately,
        RemediationAction::UseAbsolutePath,
        RemediationAction::UseCompatibleExecutable,
        RemediationAction::UseHeadlessBrowser,
        RemediationAction::UseNewKey,
        RemediationAction::WaitForHandBack,
        RemediationAction::WaitForRelease,
    ];

    /// The stable snake_case word on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            RemediationAction::AllowRemoteDebugging => "allow_remote_debugging",
            RemediationAction::ApproveInBrowser => "approve_in_browser",
            RemediationAction::CallBrowserConnect => "call_browser_connect",
            RemediationAction::CaptureAgain => "capture_again",
            RemediationAction::ChangeKey => "change_key",
            RemediationAction::CheckClientFile => "check_client_file",
            RemediationAction::ChoosePath => "choose_path",
            RemediationAction::ChoosePrivateHome => "choose_private_home",
            RemediationAction::CreateLease => "create_lease",
            RemediationAction::CreateWorkspace => "create_workspace",
            RemediationAction::Discover => "discover",
            RemediationAction::FixRemoteConfig => "fix_remote_config",
            RemediationAction::FreeResources => "free_resources",
            RemediationAction::GetCommand => "get_command",
            RemediationAction::InspectState => "inspect_state",
            RemediationAction::InstallChromium => "install_chromium",
            RemediationAction::InstallExecutable => "install_executable",
            RemediationAction::LaunchManagedBrowser => "launch_managed_browser",
            RemediationAction::ListDialogs => "list_dialogs",
            RemediationAction::ListFrames => "list_frames",
            RemediationAction::ListTabs => "list_tabs",
            RemediationAction::NarrowRequest => "narrow_request",
            RemediationAction::Observe => "observe",
            RemediationAction::ObserveAgain => "observe_again",
            RemediationAction::OpenTab => "open_tab",
            RemediationAction::OpenView => "open_view",
            RemediationAction::RebuildState => "rebuild_state",
            RemediationAction::ReleaseUnused => "release_unused",
            RemediationAction::RemoveForeignEndpoint => "remove_foreign_endpoint",
            RemediationAction::RequestCapability => "request_capability",
            RemediationAction::ResolveOverlayFirst => "resolve_overlay_first",
            RemediationAction::RestartSession => "restart_session",
            RemediationAction::RestartUnresponsiveBroker => "restart_unresponsive_broker",
            RemediationAction::SetHome => "set_home",
            RemediationAction::StartBrowser => "start_browser",
            RemediationAction::SubmitSeparately => "submit_separately",
            RemediationAction::UseAbsolutePath => "use_absolute_path",
            RemediationAction::UseCompatibleExecutable => "use_compatible_executable",
            RemediationAction::UseHeadlessBrowser => "use_headless_browser",
            RemediationAction::UseNewKey => "use_new_key",
            RemediationAction::WaitForHandBack => "wait_for_hand_back",
            RemediationAction::WaitForRelease => "wait_for_release",
        }
    }
}

/// The `context.reason` words tools attach to their refusals and unknown outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    CustomListbox,
    DialogNotFound,
    DocumentChanged,
    DocumentReplaced,
    FocusChanged,
    FrameChanged,
    FrameDetached,
    Hidden,
    NavigationStalled,
    NoFocus,
    NoMatch,
    NotEditable,
    NotFocusable,
    NotVisible,
    OptionNotFound,
    OptionDisabled,
    SessionChanged,
    SubmitNotSupported,
    TargetChanged,
    UnknownKey,
    UnsupportedElement,
}

impl Reason {
    /// Every variant, in the order of their wire words.
    pub const ALL: &'static [Reason] = &[
        Reason::CustomListbox,
        Reason::DialogNotFound,
        Reason::DocumentChanged,
        Reason::DocumentReplaced,
        Reason::FocusChanged,
        Reason::FrameChanged,
        Reason::FrameDetached,
        Reason::Hidden,
        Reason::NavigationStalled,
        Reason::NoFocus,
        Reason::NoMatch,
        Reason::NotEditable,
        Reason::NotFocusable,
        Reason::NotVisible,
        Reason::OptionNotFound,
        Reason::OptionDisabled,
        Reason::SessionChanged,
        Reason::SubmitNotSupported,
        Reason::TargetChanged,
        Reason::UnknownKey,
        Reason::UnsupportedElement,
    ];

    /// The stable snake_case word on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::CustomListbox => "custom_listbox",
            Reason::DialogNotFound => "dialog_not_found",
            Reason::DocumentChanged => "document_changed",
            Reason::DocumentReplaced => "document_replaced",
            Reason::FocusChanged => "focus_changed",
            Reason::FrameChanged => "frame_changed",
            Reason::FrameDetached => "frame_detached",
            Reason::Hidden => "hidden",
            Reason::NavigationStalled => "navigation_stalled",
            Reason::NoFocus => "no_focus",
            Reason::NoMatch => "no_match",
            Reason::NotEditable => "not_editable",
            Reason::NotFocusable => "not_focusable",
            Reason::NotVisible => "not_visible",
            Reason::OptionNotFound => "option_not_found",
            Reason::OptionDisabled => "option_disabled",
            Reason::SessionChanged => "session_changed",
            Reason::SubmitNotSupported => "submit_not_supported",
            Reason::TargetChanged => "target_changed",
            Reason::UnknownKey => "unknown_key",
            Reason::UnsupportedElement => "unsupported_element",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_unique_snake_case() {
        let actions: Vec<&str> = RemediationAction::ALL.iter().map(|a| a.as_str()).collect();
        let reasons: Vec<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        for words in [actions, reasons] {
            let unique: std::collections::HashSet<_> = words.iter().collect();
            assert_eq!(unique.len(), words.len());
            for word in words {
                assert!(
                    word.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                    "{word}"
                );
            }
        }
    }
}
