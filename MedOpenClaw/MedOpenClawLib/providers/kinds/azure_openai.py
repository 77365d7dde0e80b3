"""Azure OpenAI: Chat Completions of a deployment on the user's own resource (--base-url
https://RESOURCE.openai.azure.com, --model DEPLOYMENT, --api-version VERSION)."""

from . import ProviderKind

KIND = ProviderKind(
    name="azure-openai",
    summary="Azure OpenAI (--base-url https://RESOURCE.openai.azure.com, --model DEPLOYMENT, --api-version)",
    wire="openai_chat:AzureOpenAIProvider",
    key_variables=("AZURE_OPENAI_API_KEY",),
    vendor_hosts=(".openai.azure.com", ".cognitiveservices.azure.com"),
    profile="openai",
    token_limit_fields=("max_tokens", "max_completion_tokens"),
    needs=("api_version",),
)
