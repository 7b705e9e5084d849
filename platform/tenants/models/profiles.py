import re

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from tenants.models.tenancy import Tenant

# The SamplingParams fields a profile stores, in the engine's order. Keep in step with inference.SamplingParams.
SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "max_tokens",
    "min_tokens",
    "stop",
    "stop_token_ids",
    "ignore_eos",
    "seed",
    "n",
    "logprobs",
)


def _positive(value: float) -> None:
    if value <= 0:
        raise ValidationError("must be greater than 0 (got %(value)s)", params={"value": value})


def _string_list(value) -> None:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ValidationError("must be a list of non-empty strings, e.g. [\"###\", \"User:\"]")


def _token_id_list(value) -> None:
    ok = isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value)
    if not ok:
        raise ValidationError("must be a list of non-negative token ids, e.g. [2, 49152]")


def _between(field: str, low: float, high: float) -> Q:
    return Q(**{f"{field}__gte": low, f"{field}__lte": high})


class SamplingProfile(models.Model):
    """A named set of SamplingParams of one tenant; `name` is what the OpenAI API calls the `model`.

    Field validators give the per-field errors shown in forms; clean() also builds the engine's own
    SamplingParams (the authority on what is valid) when the engine package is importable; the
    check constraints keep out-of-range rows out of the database even past the forms.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="sampling_profiles")
    name = models.SlugField(max_length=64, help_text="Used as the `model` name in the API, e.g. coding.")
    description = models.CharField(max_length=200, blank=True)
    is_default = models.BooleanField(default=False)
    is_builtin = models.BooleanField(default=False, editable=False, help_text="Created from a built-in preset.")

    temperature = models.FloatField(default=1.0, validators=[MinValueValidator(0.0)])
    top_p = models.FloatField(default=1.0, validators=[_positive, MaxValueValidator(1.0)])
    top_k = models.IntegerField(default=0, validators=[MinValueValidator(-1)], help_text="0 or -1: off.")
    min_p = models.FloatField(default=0.0, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])
    repetition_penalty = models.FloatField(default=1.0, validators=[_positive], help_text="1.0: off.")
    presence_penalty = models.FloatField(default=0.0, validators=[MinValueValidator(-2.0), MaxValueValidator(2.0)])
    frequency_penalty = models.FloatField(default=0.0, validators=[MinValueValidator(-2.0), MaxValueValidator(2.0)])
    max_tokens = models.PositiveIntegerField(default=1024, validators=[MinValueValidator(1)])
    min_tokens = models.PositiveIntegerField(default=0)
    stop = models.JSONField(default=list, blank=True, validators=[_string_list], help_text="Stop strings.")
    stop_token_ids = models.JSONField(default=list, blank=True, validators=[_token_id_list])
    ignore_eos = models.BooleanField(default=False)
    seed = models.BigIntegerField(null=True, blank=True)
    n = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1)])
    logprobs = models.PositiveSmallIntegerField(null=True, blank=True, validators=[MaxValueValidator(20)])

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant", "name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="sampling_profile_unique_name"),
            # is_default is among the fields (redundant under the condition) so that validation can skip
            # this rule: services.save_profile moves the flag instead of reporting a clash.
            models.UniqueConstraint(
                fields=["tenant", "is_default"],
                condition=Q(is_default=True),
                name="sampling_profile_one_default_per_tenant",
            ),
            models.CheckConstraint(condition=Q(temperature__gte=0), name="sampling_profile_temperature_range"),
            models.CheckConstraint(condition=Q(top_p__gt=0, top_p__lte=1), name="sampling_profile_top_p_range"),
            models.CheckConstraint(condition=Q(top_k__gte=-1), name="sampling_profile_top_k_range"),
            models.CheckConstraint(condition=_between("min_p", 0, 1), name="sampling_profile_min_p_range"),
            models.CheckConstraint(condition=Q(repetition_penalty__gt=0), name="sampling_profile_rep_penalty_range"),
            models.CheckConstraint(
                condition=_between("presence_penalty", -2, 2), name="sampling_profile_presence_penalty_range"
            ),
            models.CheckConstraint(
                condition=_between("frequency_penalty", -2, 2), name="sampling_profile_frequency_penalty_range"
            ),
            models.CheckConstraint(condition=Q(max_tokens__gte=1), name="sampling_profile_max_tokens_range"),
            models.CheckConstraint(
                condition=Q(min_tokens__lte=models.F("max_tokens")),
                name="sampling_profile_min_tokens_le_max",
                violation_error_message="min_tokens must not exceed max_tokens.",
            ),
            models.CheckConstraint(condition=Q(n__gte=1), name="sampling_profile_n_range"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.name}"

    def sampling_kwargs(self) -> dict:
        """The stored fields as SamplingParams keyword arguments (stop lists empty -> None)."""
        kwargs = {field: getattr(self, field) for field in SAMPLING_FIELDS}
        kwargs["stop"] = list(self.stop) or None
        kwargs["stop_token_ids"] = list(self.stop_token_ids) or None
        return kwargs

    def to_sampling_params(self, **overrides):
        """An inference.SamplingParams from this profile, with per-request overrides (validated by the engine).

        Raises ValueError (naming the field) on a bad override, ImportError without the engine package.
        """
        from inference import SamplingParams

        return SamplingParams(**{**self.sampling_kwargs(), **overrides})

    def validate_constraints(self, exclude=None) -> None:
        super().validate_constraints(exclude={*(exclude or ()), "is_default"})

    def clean(self) -> None:
        super().clean()
        if self.min_tokens is not None and self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise ValidationError({"min_tokens": "must not exceed max_tokens."})
        validate_with_engine(self.sampling_kwargs())


def _first_field_named(message: str) -> str | None:
    """The sampling field mentioned first in an error message ("min_tokens must be <= max_tokens" -> min_tokens)."""
    hits = [(m.start(), name) for name in SAMPLING_FIELDS if (m := re.search(rf"\b{name}\b", message))]
    return min(hits)[1] if hits else None


def validate_with_engine(kwargs: dict) -> None:
    """Build the engine's SamplingParams from kwargs; its ValueError becomes a ValidationError on the named field.

    Skipped when the engine package is not importable (the field validators above still apply).
    """
    try:
        from inference import SamplingParams
    except ImportError:
        return
    try:
        SamplingParams(**kwargs)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        field = getattr(exc, "field", None) or _first_field_named(message)
        field = field if field in SAMPLING_FIELDS else None
        raise ValidationError({field: message} if field else message) from exc
