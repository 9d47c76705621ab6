"""The Models service: what the server has loaded, and what each model can do."""

from __future__ import annotations

import grpc

from vocalis.server import field_lengths
from vocalis.server.engine import Engine
from vocalis.server.errors import StatusError, abort
from vocalis.server.field_policy import IGNORABLE
from vocalis.server.session_config import PROTO_ENCODINGS, UNIVERSAL_FIELDS
from vocalis.stages.api.extra_params import ExtraParam
from vocalis.stages.api.model import LoadedModel
from vocalis.tts.v1 import models_pb2, models_pb2_grpc, synthesizer_pb2

_ALL_FIELDS = frozenset(f.name for f in synthesizer_pb2.SessionConfig.DESCRIPTOR.fields) - {"unknown_fields"}


def describe_model(model: LoadedModel, is_default: bool, max_input_chars: int) -> models_pb2.Model:
    caps = model.capabilities
    accepted = sorted(UNIVERSAL_FIELDS | caps.accepted_fields)
    ignored = sorted(set(IGNORABLE) - set(accepted))
    return models_pb2.Model(
        name=model.name,
        aliases=list(model.aliases),
        family=model.family,
        is_default=is_default,
        capabilities=models_pb2.ModelCapabilities(
            sample_rate=caps.sample_rate,
            encodings=sorted(PROTO_ENCODINGS.values()),
            voices=list(caps.voices),
            default_voice=caps.default_voice,
            accepted_fields=accepted,
            required_fields=sorted(caps.required_fields),
            rejected_fields=sorted(_ALL_FIELDS - set(accepted) - set(ignored)),
            ignored_fields=ignored,
            extra_params=sorted(param.name for param in caps.extra_params),
            streaming=caps.streaming,
            voice_cloning=caps.voice_cloning,
            languages=list(caps.languages),
            limits=models_pb2.ModelLimits(
                max_input_chars=max_input_chars, min_speed=caps.min_speed, max_speed=caps.max_speed
            ),
            extra_param_specs=[describe_extra_param(param) for param in caps.extra_params],
        ),
    )


def describe_extra_param(param: ExtraParam) -> models_pb2.ExtraParam:
    return models_pb2.ExtraParam(
        name=param.name, description=param.description, type=param.type_name, minimum=param.minimum, maximum=param.maximum,
        exclusive_minimum=param.exclusive_minimum, choices=list(param.choices),
    )


class ModelsService(models_pb2_grpc.ModelsServicer):
    def __init__(self, engine: Engine, max_input_chars: int) -> None:
        self.engine = engine
        self.max_input_chars = max_input_chars

    def _describe(self, model: LoadedModel) -> models_pb2.Model:
        return describe_model(model, model.name == self.engine.default_model, self.max_input_chars)

    async def ListModels(self, request: models_pb2.ListModelsRequest, context: grpc.aio.ServicerContext) -> models_pb2.ListModelsResponse:
        return models_pb2.ListModelsResponse(models=[self._describe(m) for m in self.engine.models.values()])

    async def GetModel(self, request: models_pb2.GetModelRequest, context: grpc.aio.ServicerContext) -> models_pb2.GetModelResponse:
        try:
            field_lengths.check_value("name", request.name, field_lengths.MAX_CHARS["model"])
            model = self.engine.model(request.name)
        except StatusError as error:
            await abort(context, error)
        return models_pb2.GetModelResponse(model=self._describe(model))
